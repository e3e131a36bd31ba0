package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/service"
)

// TestAddTopicMirroredByAnotherMirror: every mirror writes into the one
// destination, so a topic another mirror mirrors cannot be added; once that
// mirror stops it, it can.
func TestAddTopicMirroredByAnotherMirror(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	catalog := service.CatalogFunc(func(context.Context, kafkaconn.Config) (map[string]int32, error) {
		return map[string]int32{"orders": 2}, nil
	})
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: name, Source: service.SourceInput{BootstrapServers: "h:1"}}, service.WriteOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.AddTopics(ctx, "a", service.AddTopicsInput{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	_, err = svc.AddTopics(ctx, "b", service.AddTopicsInput{Topic: "orders"})
	var cf *service.ConflictError
	if !errors.As(err, &cf) || !strings.Contains(cf.Detail, "orders is mirrored by mirror a") {
		t.Fatalf("add to b = %v, want a conflict naming mirror a", err)
	}
	if _, err := repo.TopicsGet(ctx, pool, "b", "orders"); !errors.Is(err, repo.ErrNotFound) {
		t.Fatalf("b/orders exists after the refused add: %v", err)
	}
	// The database refuses it too.
	if err := repo.TopicsUpsert(ctx, pool, repo.TopicsUpsertParams{Mirror: "b", Topic: "orders",
		DesiredState: service.DesiredMirroring, ReplicationFactor: -1, Partitions: 2}); !errors.Is(err, repo.ErrConflict) {
		t.Fatalf("direct insert = %v, want ErrConflict", err)
	}
	if _, err := svc.RemoveTopics(ctx, "a", "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddTopics(ctx, "b", service.AddTopicsInput{Topic: "orders"}); err != nil {
		t.Fatalf("add to b after a stopped it: %v", err)
	}
}

package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"kmirror/internal/testing/testdb"
	"kmirror/service"
)

// TestDeleteMirrorWaitsForStopping: right after topics:remove a topic is
// STOPPING; delete refuses it at once, but with a wait it returns as soon
// as the partition reaches STOPPED. A topic never removed is refused at
// once even with a wait, since waiting would not help.
func TestDeleteMirrorWaitsForStopping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1'), ('kept', 'h:1')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('m', 'orders', 'stopped'), ('kept', 'logs', 'mirroring')`,
		`INSERT INTO mirror_partitions (mirror, topic, partition, state) VALUES ('m', 'orders', 0, 'STOPPING'), ('kept', 'logs', 0, 'MIRRORING')`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var cf *service.ConflictError
	if err := svc.DeleteMirror(ctx, "m", service.DeleteOpts{}); !errors.As(err, &cf) || !strings.Contains(cf.Detail, "STOPPING") {
		t.Fatalf("delete without wait: %v, want a conflict naming STOPPING", err)
	}
	start := time.Now()
	if err := svc.DeleteMirror(ctx, "kept", service.DeleteOpts{Wait: 10 * time.Second}); !errors.As(err, &cf) ||
		!strings.Contains(cf.Detail, "not removed") || time.Since(start) > 5*time.Second {
		t.Fatalf("delete of a mirror with a topic not removed: %v after %s, want an immediate conflict", err, time.Since(start))
	}
	var ve *service.ValidationError
	if err := svc.DeleteMirror(ctx, "m", service.DeleteOpts{Wait: time.Minute}); !errors.As(err, &ve) {
		t.Fatalf("wait of 1m: %v, want a validation error", err)
	}

	done := make(chan error, 1)
	go func() { done <- svc.DeleteMirror(ctx, "m", service.DeleteOpts{Wait: 20 * time.Second}) }()
	select {
	case err := <-done:
		t.Fatalf("delete returned %v while the topic was STOPPING", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := pool.Exec(ctx, `UPDATE mirror_partitions SET state = 'STOPPED', previous_state = 'STOPPING' WHERE mirror = 'm'`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("delete after STOPPED: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("delete did not return after the topic reached STOPPED")
	}
	if _, err := svc.GetMirror(ctx, "m"); err == nil {
		t.Fatal("mirror m still exists")
	}
}

package workers

import (
	"context"
	"strings"
	"testing"
	"time"

	"kmirror/internal/devcluster"
	"kmirror/repo"
	"kmirror/service"
)

// TestSourceRecreatedWhilePaused: resume skips alignment, so a source topic
// deleted and created again during a pause is caught by its topic id before
// anything of the new topic is mirrored.
func TestSourceRecreatedWhilePaused(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 1, 10)
	ctx := context.Background()
	if _, err := env.svc.PauseTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.waitStates("m", service.StatePaused, 10*time.Second)

	if err := env.clusters.Source.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	if err := env.clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRecords(t, plain(env.clusters.SourceAddr()), seq("orders", 0, "new", 30)...)
	if _, err := env.svc.ResumeTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	row := env.waitPartition("m", "orders", 0, 20*time.Second, "FAILED, not retryable", func(r repo.Partition) bool {
		return r.State == string(service.StateFailed) && !r.Retryable
	})
	if !strings.Contains(row.Error, "deleted and recreated") {
		t.Fatalf("error does not say the source topic was recreated: %q", row.Error)
	}
	dst := readAll(t, env.clusters.DestinationAddr(), "orders", 0, false)
	if len(dst) != 10 {
		t.Fatalf("destination has %d records, want the 10 old ones", len(dst))
	}
	for _, r := range dst {
		if strings.HasPrefix(string(r.Value), "new") {
			t.Fatalf("a record of the recreated source topic was mirrored: %q", r.Value)
		}
	}

	// Remove and add again with recreate: the new topic is mirrored from
	// its start into a fresh destination topic.
	if _, err := env.svc.RemoveTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.waitStates("m", service.StateStopped, 20*time.Second)
	if _, err := env.svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "orders", Recreate: true}); err != nil {
		t.Fatal(err)
	}
	env.waitStates("m", service.StateMirroring, 20*time.Second)
	waitMirrored(t, env, "orders", 1, 20*time.Second)
}

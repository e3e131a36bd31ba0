package partition_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"kmirror/internal/devenv/devcluster"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestSourceRecreatedWhilePaused: resume skips alignment, so a source topic
// deleted and created again during a pause is caught by its topic id before
// anything of the new topic is mirrored.
func TestSourceRecreatedWhilePaused(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 1, 10)
	ctx := context.Background()
	if _, err := env.Svc.PauseTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StatePaused, 10*time.Second)

	if err := env.Clusters.Source.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	if err := env.Clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("orders", 0, "new", 30)...)
	if _, err := env.Svc.ResumeTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	row := env.waitPartition("m", "orders", 0, 20*time.Second, "FAILED, not retryable", func(r repo.Partition) bool {
		return r.State == service.StateFailed && !r.Retryable
	})
	if !strings.Contains(row.Error, "deleted and recreated") {
		t.Fatalf("error does not say the source topic was recreated: %q", row.Error)
	}
	dst := workertest.ReadAll(t, env.Clusters.DestinationAddr(), "orders", 0, false)
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
	if _, err := env.Svc.RemoveTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StateStopped, 20*time.Second)
	if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "orders", Recreate: true}); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitMirrored(t, env.Env, "orders", 1, 20*time.Second)
}

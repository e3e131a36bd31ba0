package partition

import (
	"context"
	"testing"
	"time"

	"kmirror/service"
	"kmirror/workers/lease"
)

// TestWorkerSeesADesireChangeBeforeItWaits: a desired state that changes
// after the worker read it, but before it waits, still wakes the wait.
// Taking the change signal afresh at the wait missed such a change until
// the next one: a pause that came while a mirroring session handled
// acknowledgements waited for the session's 30 s tick.
func TestWorkerSeesADesireChangeBeforeItWaits(t *testing.T) {
	key := [2]string{"m", "t"}
	d := newDesiredStates(nil)
	d.store(map[[2]string]topicDesire{key: {state: service.DesiredStopped}})
	w := &partitionWorker{e: &Engine{desired: d}, key: lease.Key{Mirror: "m", Topic: "t"}, stopping: make(chan struct{})}
	if got, err := w.desire(t.Context()); err != nil || got.state != service.DesiredStopped {
		t.Fatalf("desire: %v, %v", got, err)
	}
	d.store(map[[2]string]topicDesire{key: {state: service.DesiredMirroring}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := w.idle(ctx); err != nil {
		t.Fatalf("idle missed the change made before it waited: %v", err)
	}
	// The same for the wait before a retry: the topic is removed meanwhile.
	if _, err := w.desire(t.Context()); err != nil {
		t.Fatal(err)
	}
	d.store(map[[2]string]topicDesire{key: {state: service.DesiredStopped}})
	start := time.Now()
	if err := w.waitUntil(ctx, time.Now().Add(time.Minute)); err != nil || time.Since(start) > time.Second {
		t.Fatalf("waitUntil returned %v after %s; want nil at once", err, time.Since(start))
	}
}

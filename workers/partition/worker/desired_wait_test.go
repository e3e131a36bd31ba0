package worker

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"kmirror/service"
	"kmirror/workers/lease"
)

// desires is a desired-state cache as the engine keeps it: a change
// closes the channel Changed returned and makes a new one.
type desires struct {
	mu      sync.Mutex
	topics  map[[2]string]Desire
	changed chan struct{}
}

func (d *desires) Desire(mirror, topic string) (Desire, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.topics[[2]string{mirror, topic}]
	return t, ok
}

func (d *desires) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

func (d *desires) Refresh(context.Context) error { return nil }

func (d *desires) store(m map[[2]string]Desire) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !maps.Equal(d.topics, m) {
		d.topics = m
		close(d.changed)
		d.changed = make(chan struct{})
	}
}

// TestWorkerSeesADesireChangeBeforeItWaits: a desired state that changes
// after the worker read it, but before it waits, still wakes the wait.
// Taking the change signal afresh at the wait would miss such a change
// until the next one: a pause that comes while a mirroring session handles
// acknowledgements would wait for the session's 30 s tick.
func TestWorkerSeesADesireChangeBeforeItWaits(t *testing.T) {
	key := [2]string{"m", "t"}
	d := &desires{changed: make(chan struct{})}
	d.store(map[[2]string]Desire{key: {State: service.DesiredStopped}})
	w := &Worker{p: Ports{Desires: d}, key: lease.Key{Mirror: "m", Topic: "t"}, stopping: make(chan struct{})}
	if got, err := w.desire(t.Context()); err != nil || got.State != service.DesiredStopped {
		t.Fatalf("desire: %v, %v", got, err)
	}
	d.store(map[[2]string]Desire{key: {State: service.DesiredMirroring}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := w.idle(ctx); err != nil {
		t.Fatalf("idle missed the change made before it waited: %v", err)
	}
	// The same for the wait before a retry: the topic is removed meanwhile.
	if _, err := w.desire(t.Context()); err != nil {
		t.Fatal(err)
	}
	d.store(map[[2]string]Desire{key: {State: service.DesiredStopped}})
	start := time.Now()
	if err := w.waitUntil(ctx, time.Now().Add(time.Minute)); err != nil || time.Since(start) > time.Second {
		t.Fatalf("waitUntil returned %v after %s; want nil at once", err, time.Since(start))
	}
}

package notifier

import (
	"context"
	"testing"
	"time"
)

// TestLoopTicksAndEnds: without a subscription Loop still runs fn every
// interval, and it returns once ctx ends.
func TestLoopTicksAndEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	runs := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop(ctx, 5*time.Millisecond, nil, func(context.Context) { runs <- struct{}{} })
	}()
	for range 3 {
		select {
		case <-runs:
		case <-time.After(10 * time.Second):
			t.Fatal("Loop did not tick")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Loop did not return after its context ended")
	}
}

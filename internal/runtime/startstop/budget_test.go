package startstop

import (
	"context"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	var nilBudget *Budget
	if got := nilBudget.Left(time.Second); got != time.Second {
		t.Fatalf("nil budget: Left = %s, want the step's own bound", got)
	}
	b := &Budget{}
	if got := b.Left(3 * time.Second); got != 3*time.Second {
		t.Fatalf("before Begin: Left = %s, want the step's own bound", got)
	}
	if got := b.Bound(3*time.Second, 100*time.Millisecond); got != 3*time.Second {
		t.Fatalf("before Begin: Bound = %s, want the normal bound", got)
	}
	b.Begin(time.Second)
	b.Begin(time.Hour) // no effect
	if got := b.Bound(3*time.Second, 100*time.Millisecond); got != 100*time.Millisecond {
		t.Fatalf("after Begin: Bound = %s, want the stopping bound", got)
	}
	if got := b.Left(3 * time.Second); got > time.Second || got < 900*time.Millisecond {
		t.Fatalf("after Begin(1s): Left(3s) = %s, want about 1s", got)
	}
	if got := b.Left(100 * time.Millisecond); got != 100*time.Millisecond {
		t.Fatalf("after Begin(1s): Left(100ms) = %s, want the step's own, smaller bound", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	step, stepCancel := b.Context(ctx, time.Hour)
	defer stepCancel()
	cancel()
	if step.Err() != nil {
		t.Fatal("a step's context ended with its parent's cancellation")
	}
	spent := &Budget{}
	spent.Begin(0)
	if got := spent.Left(time.Second); got != 0 {
		t.Fatalf("spent budget: Left = %s, want 0", got)
	}
	done, doneCancel := spent.Context(context.Background(), time.Second)
	defer doneCancel()
	if done.Err() == nil {
		t.Fatal("a spent budget's context has not ended")
	}
}

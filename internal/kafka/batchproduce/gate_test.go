package batchproduce

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestProduceGate: a batch waits until it fits, one larger than the limit
// goes alone, and a wait ends with its context's cause.
func TestProduceGate(t *testing.T) {
	g := NewGate(10)
	ctx := t.Context()
	if err := g.Acquire(ctx, 8); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- g.Acquire(ctx, 5) }()
	select {
	case err := <-got:
		t.Fatalf("8 + 5 records fit a gate of 10 (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.Release(3)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	g.Release(10)
	if err := g.Acquire(ctx, 25); err != nil {
		t.Fatalf("a batch larger than the limit must go when nothing is held: %v", err)
	}
	cause := errors.New("delivery timeout")
	cctx, cancel := context.WithCancelCause(ctx)
	time.AfterFunc(20*time.Millisecond, func() { cancel(cause) })
	if err := g.Acquire(cctx, 1); !errors.Is(err, cause) {
		t.Fatalf("acquire after its context ended: %v, want %v", err, cause)
	}
}

// TestProduceGateWakesEveryWaiter: waiters of different sizes (one fetch
// goroutine per mirror) all get room as it comes back in small runs; none
// is left waiting because another registered a smaller need.
func TestProduceGateWakesEveryWaiter(t *testing.T) {
	g := NewGate(100)
	if err := g.Acquire(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got := make(chan error, 3)
	for _, n := range []int64{60, 30, 10} { // each smaller: need shows it waits
		go func() { got <- g.Acquire(ctx, n) }()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			g.mu.Lock()
			waiting := g.need == n
			g.mu.Unlock()
			if waiting {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the waiter for %d never waited", n)
			}
		}
	}
	for range 10 {
		g.Release(10) // the promise gives room back in runs
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		if err := <-got; err != nil {
			t.Fatalf("a waiter got no room after all of it came back: %v", err)
		}
	}
	if g.held != 100 {
		t.Fatalf("held %d, want 100", g.held)
	}
}

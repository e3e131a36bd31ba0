package startstop

import (
	"context"
	"sync"
	"time"
)

// Budget is the time a shutdown has, shared by the steps that stop one after
// another (a worker's last checkpoint, its lease's release, the producer's
// flush, the outbox's last records...). Each step waits at most the least of
// its own bound and what is left, so the whole shutdown ends within the
// budget whatever is down: once it is spent, the steps left get a context
// that has already ended and skip their network calls. Before Begin, and on
// a nil Budget, a step gets its own bound.
type Budget struct {
	mu       sync.Mutex
	deadline time.Time
}

// Begin starts the budget with d to spend; later calls change nothing.
func (b *Budget) Begin(d time.Duration) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.deadline.IsZero() {
		b.deadline = time.Now().Add(d)
	}
}

// Left is the least of max and the time left (never negative); max before
// Begin.
func (b *Budget) Left(max time.Duration) time.Duration {
	if b == nil {
		return max
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.deadline.IsZero() {
		return max
	}
	return Clamp(min(max, time.Until(b.deadline)))
}

// Bound is normal before Begin, and Left(stopping) after: for waits that a
// shutdown must cut shorter than they are in normal running.
func (b *Budget) Bound(normal, stopping time.Duration) time.Duration {
	if !b.Begun() {
		return normal
	}
	return b.Left(stopping)
}

// Begun says whether the shutdown began.
func (b *Budget) Begun() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.deadline.IsZero()
}

// Context returns a context with parent's values, not ended by parent's
// cancellation, that ends after Left(max).
func (b *Budget) Context(parent context.Context, max time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(parent), b.Left(max))
}

// Clamp is d, or 0 when d is negative.
func Clamp(d time.Duration) time.Duration { return max(d, 0) }

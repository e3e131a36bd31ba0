package batchproduce

import (
	"context"
	"sync"
)

// Gate bounds the records the engine has produced and not yet seen
// answered, across every partition. A session takes room for a whole
// fetched batch before it produces it, and the promise gives the room back
// as it publishes results. The wait happens here, before the batch is
// handed to the producer, so the producer never holds a batch back for
// room and its results stay in produce order.
type Gate struct {
	mu    sync.Mutex
	limit int64
	held  int64
	// freed is closed, and replaced, once the smallest batch waiting (need,
	// 0 while none waits) fits: while a backlog keeps the buffer full, the
	// fetch goroutine then wakes once a batch, not at every run of results
	// the promise publishes.
	freed chan struct{}
	need  int64
}

// NewGate returns a Gate that lets limit records be in flight.
func NewGate(limit int64) *Gate {
	return &Gate{limit: limit, freed: make(chan struct{})}
}

// Acquire waits until n more records fit, or returns the context's cause
// if it ends first. A batch larger than the limit goes alone.
func (g *Gate) Acquire(ctx context.Context, n int64) error {
	for {
		g.mu.Lock()
		if g.held == 0 || g.held+n <= g.limit {
			g.held += n
			g.mu.Unlock()
			return nil
		}
		if g.need == 0 || n < g.need {
			g.need = n
		}
		freed := g.freed
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-freed:
		}
	}
}

// Release gives back room for n answered records.
func (g *Gate) Release(n int64) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	g.held -= n
	if g.need > 0 && (g.held == 0 || g.held+g.need <= g.limit) {
		close(g.freed)
		g.freed, g.need = make(chan struct{}), 0
	}
	g.mu.Unlock()
}

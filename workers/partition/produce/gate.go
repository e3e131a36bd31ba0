package produce

import (
	"context"
	"sync"
)

// Gate bounds the records the engine has produced and not yet seen
// answered, across every partition. A session takes room for a whole
// fetched batch before it produces any record of it, and the promise gives
// the room back as it publishes results.
//
// kgo has such a bound (MaxBufferedRecords), but a Produce blocked on it
// fails its record as soon as the record's context ends, and reports that
// failure ahead of the earlier records still buffered or in flight. The
// results then no longer come in produce order, which Acks relies on, and
// a later record of the session that finds room a moment after can still
// be sent behind a batch in flight: the destination skips a record
// (TestProduceGateKeepsResultsInOrder). So the engine's producer has no
// buffer limit of its own (Options), kgo never blocks, and the wait
// happens here, before any record of the batch is handed to kgo.
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

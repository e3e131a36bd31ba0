package partition

import (
	"context"
	"sync"
)

// produceGate bounds the records the engine has produced and not yet seen
// answered, across every partition. A session takes room for a whole
// fetched batch before it produces any record of it, and the promise gives
// the room back as it publishes results.
//
// kgo has such a bound (MaxBufferedRecords), but a Produce blocked on it
// fails its record as soon as the record's context ends, and reports that
// failure ahead of the earlier records still buffered or in flight. The
// results then no longer come in produce order, which produceAcks relies
// on, and a later record of the session that finds room a moment after can
// still be sent behind a batch in flight: the destination skips a record
// (TestProduceGateKeepsResultsInOrder). So the engine's producer has no
// buffer limit of its own, kgo never blocks, and the wait happens here,
// before any record of the batch is handed to kgo.
type produceGate struct {
	mu    sync.Mutex
	limit int64
	held  int64
	// freed is closed when room is given back while someone waits, and then
	// replaced.
	freed   chan struct{}
	waiting bool
}

func newProduceGate(limit int64) *produceGate {
	return &produceGate{limit: limit, freed: make(chan struct{})}
}

// acquire waits until n more records fit, or returns the context's cause
// if it ends first. A batch larger than the limit goes alone.
func (g *produceGate) acquire(ctx context.Context, n int64) error {
	for {
		g.mu.Lock()
		if g.held == 0 || g.held+n <= g.limit {
			g.held += n
			g.mu.Unlock()
			return nil
		}
		g.waiting = true
		freed := g.freed
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-freed:
		}
	}
}

// release gives back room for n answered records.
func (g *produceGate) release(n int64) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	g.held -= n
	if g.waiting {
		close(g.freed)
		g.freed, g.waiting = make(chan struct{}), false
	}
	g.mu.Unlock()
}

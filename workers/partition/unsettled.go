package partition

import (
	"context"
	"time"

	"kmirror/workers/lease"
)

// unsettledCopies are the records of an ended mirroring session that kgo
// has not reported on yet. The idempotent producer does not fail a record
// whose request is in flight: it waits for the broker's answer, however
// long a stalled destination takes, and the record may still land. A
// session gives up waiting after the delivery timeout plus 2 s, so its last
// copies can outlive it.
type unsettledCopies struct {
	acks *produceAcks
	end  int64 // destination offset after the session's last produced record
}

func (u *unsettledCopies) pending() int64 { return u.end - u.acks.base - u.acks.done.Load() }

// settledWaitMax bounds how long a partition waits for an earlier
// session's copies before it fails (and retries later) instead.
const settledWaitMax = time.Minute

// keepUnsettled records a session that ended with copies in flight.
func (e *Engine) keepUnsettled(k lease.Key, acks *produceAcks, end int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for key, u := range e.unsettled {
		if u.pending() <= 0 {
			delete(e.unsettled, key)
		}
	}
	e.unsettled[k] = &unsettledCopies{acks: acks, end: end}
}

// awaitSettled returns once every copy of the partition's earlier sessions
// on this instance has landed or failed. Alignment reads the destination's
// end and a new session copies from there: a copy landing after that read
// would put the same source records in the destination twice, and
// alignment could only call the result a divergence
// (TestScenarioStalledProduceOutlivesSession).
func (e *Engine) awaitSettled(ctx context.Context, k lease.Key) error {
	e.mu.Lock()
	u := e.unsettled[k]
	e.mu.Unlock()
	if u == nil {
		return nil
	}
	deadline := time.NewTimer(settledWaitMax)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	logged := false
	for u.pending() > 0 {
		if !logged {
			e.log.Warn("waiting for the destination to answer an earlier session's copies before aligning",
				"mirror", k.Mirror, "topic", k.Topic, "partition", k.Partition, "copies", u.pending())
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return retryable("%d copies of an earlier session are still unanswered by the destination after %s; "+
				"they may yet land, so alignment waits for them", u.pending(), settledWaitMax)
		case <-u.acks.notify:
			u.acks.woken.Store(false)
		case <-tick.C:
		}
	}
	e.mu.Lock()
	if e.unsettled[k] == u {
		delete(e.unsettled, k)
	}
	e.mu.Unlock()
	return nil
}

package partition

import (
	"context"
	"fmt"
	"time"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/workers/lease"
)

// unsettledCopies are the records of an ended mirroring session that kgo
// has not reported on yet. The idempotent producer does not fail a record
// whose request is in flight: it waits for the broker's answer, however
// long a stalled destination takes, and the record may still land. A
// session gives up waiting after the delivery timeout plus 2 s, so its last
// copies can outlive it.
type unsettledCopies struct {
	acks *batchproduce.Acks
	// dest is the destination topic they went to.
	dest string
	end  int64 // destination offset after the session's last produced record
	// since is when the session ended; writtenOff is set once the copies
	// were written off (under the watch's mu).
	since      time.Time
	writtenOff bool
}

func (u *unsettledCopies) pending() int64 { return u.end - u.acks.Base() - u.acks.Done() }

// Settled says whether every copy of the partition's ended sessions has
// been answered; the lease manager releases a lease only then
// (lease.PartitionSettler), so another instance cannot align under copies
// that may yet land. Copies unanswered for SettledWaitMax are written off
// (writeOffStale): a lease is given back within that bound, whatever the
// destination does, and is never left held by an instance that no longer
// runs its partition.
func (e *Engine) Settled(k lease.Key) bool { return e.watch.settled(k) }

func (w *destinationWatch) settled(k lease.Key) bool {
	w.mu.Lock()
	u := w.unsettled[k]
	if u == nil {
		w.mu.Unlock()
		return true
	}
	if u.pending() <= 0 {
		delete(w.unsettled, k)
		w.mu.Unlock()
		return true
	}
	w.mu.Unlock()
	w.writeOffStale(k, u)
	return false
}

// KeepUnsettled records a session that ended with copies in flight.
func (w *destinationWatch) KeepUnsettled(k lease.Key, dest string, acks *batchproduce.Acks, end int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, u := range w.unsettled {
		if u.pending() <= 0 {
			delete(w.unsettled, key)
		}
	}
	w.unsettled[k] = &unsettledCopies{acks: acks, dest: dest, end: end, since: time.Now()}
}

// writeOffStale writes off the partition's unsettled copies once they have
// gone unanswered for SettledWaitMax. By then each was retried for far
// longer than a broker holds a produce request, so a late landing is not
// to be expected; and should one land all the same, the next alignment
// compares every record past the checkpoint with the source, so it is
// found (a divergence), never copied over.
func (w *destinationWatch) writeOffStale(k lease.Key, u *unsettledCopies) {
	w.mu.Lock()
	due := !u.writtenOff && time.Since(u.since) >= w.settledWaitMax
	if due {
		u.writtenOff = true
	}
	w.mu.Unlock()
	if !due {
		return
	}
	w.log.Warn("an ended session's copies are still unanswered by the destination; writing them off",
		"mirror", k.Mirror, "topic", k.Topic, "partition", k.Partition, "copies", u.pending(), "after", w.settledWaitMax)
	w.WriteOff(u.dest, fmt.Sprintf("copies of an earlier session of %s/%d went unanswered for %s and were written off",
		k.Topic, k.Partition, w.settledWaitMax))
}

// AwaitSettled returns once every copy of the partition's earlier sessions
// on this instance has landed, failed or been written off. Alignment reads
// the destination's end and a new session copies from there: a copy landing
// after that read would put the same source records in the destination
// twice, and alignment could only call the result a divergence
// (TestScenarioStalledProduceOutlivesSession). waiting, when set, is told
// once that the wait began, so the partition's row can say why nothing
// moves.
func (w *destinationWatch) AwaitSettled(ctx context.Context, k lease.Key, waiting func(copies int64, since time.Time)) error {
	w.mu.Lock()
	u := w.unsettled[k]
	w.mu.Unlock()
	if u == nil {
		return nil
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	logged := false
	for u.pending() > 0 {
		if !logged {
			w.log.Warn("waiting for the destination to answer an earlier session's copies before aligning",
				"mirror", k.Mirror, "topic", k.Topic, "partition", k.Partition, "copies", u.pending())
			logged = true
			if waiting != nil {
				waiting(u.pending(), u.since)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-u.acks.Notify():
			u.acks.Rearm()
		case <-tick.C:
			w.writeOffStale(k, u)
		}
	}
	w.mu.Lock()
	if w.unsettled[k] == u {
		delete(w.unsettled, k)
	}
	w.mu.Unlock()
	return nil
}

package partition

import (
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// pendingRun is what a session has sent and not yet seen acknowledged: n
// records whose source offsets and destination offsets both follow on
// from src and dst, or one source transaction marker (control), which is
// never produced. A fetched batch is usually one run, so the bookkeeping
// is per batch rather than per record.
type pendingRun struct {
	src, dst int64
	n        int64
	control  bool
}

// produceAcks counts one session's produce results without a lock or a
// queue per record. kgo calls a partition's promises one at a time, in the
// order the records were produced, so the k-th result belongs to the k-th
// record produced, whose destination offset must be base+k.
type produceAcks struct {
	base int64 // destination offset of the session's first record
	// done counts results; verified counts those before the first failure,
	// each at the offset it was meant for.
	done, verified atomic.Int64
	// bytes sums the key and value bytes of the verified results. Only the
	// promise touches it (kgo calls a partition's promises in order, one at
	// a time). It is published to the worker as verifiedBytes at the end
	// of each produced batch and at the first failure, before verified
	// moves, rather than per record: that saves a full-barrier atomic store
	// per record (BenchmarkAckedBatch). producedEnd is the destination
	// offset after the last batch the worker produced, set before it
	// produces the batch, so the promise knows a batch's last record.
	bytes         int64
	verifiedBytes atomic.Int64
	producedEnd   atomic.Int64
	// woken is set when notify holds a wake-up the worker has not taken,
	// so a burst of results costs one channel send.
	woken  atomic.Bool
	notify chan struct{}

	mu      sync.Mutex
	failure *produceFailure // the first failure, nil while none

	// onFailure runs at the first failure, in the promise, so that no later
	// record of the session is sent (see mirrorSession.produceCtx).
	onFailure func()
}

// produceFailure is the first result that was not a verified copy.
type produceFailure struct {
	index int64 // in produce order, from 0
	err   error // the produce error, or nil for a foreign write
	got   int64 // the offset it landed at, for a foreign write
}

func newProduceAcks(base int64) *produceAcks {
	return &produceAcks{base: base, notify: make(chan struct{}, 1)}
}

// promise is the produce callback of every record of the session.
func (a *produceAcks) promise(r *kgo.Record, err error) {
	k := a.done.Load()
	if a.verified.Load() == k { // no failure yet
		if err == nil && r.Offset == a.base+k {
			a.bytes += int64(len(r.Key) + len(r.Value))
			if a.base+k+1 >= a.producedEnd.Load() {
				a.verifiedBytes.Store(a.bytes)
			}
			a.verified.Store(k + 1)
		} else {
			a.verifiedBytes.Store(a.bytes)
			a.mu.Lock()
			a.failure = &produceFailure{index: k, err: err, got: r.Offset}
			a.mu.Unlock()
			if a.onFailure != nil {
				a.onFailure()
			}
		}
	}
	a.done.Store(k + 1)
	if !a.woken.Swap(true) {
		select {
		case a.notify <- struct{}{}:
		default:
		}
	}
}

// take is the worker's side: how many results arrived and were verified,
// and the first failure if there was one.
func (a *produceAcks) take() (done, verified int64, failure *produceFailure) {
	a.woken.Store(false)
	// verified before done: done then counts at least every verified one.
	verified = a.verified.Load()
	done = a.done.Load()
	if verified < done {
		a.mu.Lock()
		failure = a.failure
		a.mu.Unlock()
	}
	return done, verified, failure
}

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
// record produced, whose destination offset must be base+k. That order
// holds because no record fails before kgo buffers it: kgo's own buffer
// limit is off and produceGate waits instead (see there).
//
// The promise counts in plain fields that only it touches and publishes
// them to the worker (done, verified, verifiedBytes, then a wake-up) in
// runs: every publishEvery results, at the result of the last record
// produced so far, and at the first failure. An atomic store is a full
// barrier on amd64, and the worker reads these fields as the promise
// writes them, so three stores per record cost more than the rest of the
// bookkeeping (BenchmarkAckedBatch). Between publications done may trail
// the results by up to publishEvery-1 while later records are still in
// flight; the last record produced always publishes, so settling waits for
// nothing more than the results themselves.
type produceAcks struct {
	base int64 // destination offset of the session's first record
	// done counts published results; verified those before the first
	// failure, each at the offset it was meant for; verifiedBytes sums
	// their key and value bytes, stored before verified moves.
	done, verified atomic.Int64
	verifiedBytes  atomic.Int64
	// producedEnd is the destination offset after the last batch the
	// worker produced, set before it produces the batch, so the promise
	// knows the last record produced so far.
	producedEnd atomic.Int64
	// results, bytes and failed are the promise's own counts.
	results, bytes int64
	failed         bool
	// woken is set when notify holds a wake-up the worker has not taken,
	// so a burst of results costs one channel send.
	woken  atomic.Bool
	notify chan struct{}

	mu      sync.Mutex
	failure *produceFailure // the first failure, nil while none

	// gate gets back the room of each published run of results; released
	// counts those given back so far (the promise's own).
	gate     *produceGate
	released int64

	// onFailure runs at the first failure, in the promise, so that no later
	// record of the session is sent (see mirrorSession.produceCtx).
	onFailure func()
}

// publishEvery is how many results the promise counts between two
// publications to the worker, at most.
const publishEvery = 128

// produceFailure is the first result that was not a verified copy.
type produceFailure struct {
	index int64 // in produce order, from 0
	err   error // the produce error, or nil for a foreign write
	got   int64 // the offset it landed at, for a foreign write
}

func newProduceAcks(base int64, gate *produceGate) *produceAcks {
	return &produceAcks{base: base, notify: make(chan struct{}, 1), gate: gate}
}

// promise is the produce callback of every record of the session.
func (a *produceAcks) promise(r *kgo.Record, err error) {
	k := a.results
	a.results = k + 1
	failedNow := false
	if !a.failed {
		if err == nil && r.Offset == a.base+k {
			a.bytes += int64(len(r.Key) + len(r.Value))
		} else {
			a.failed, failedNow = true, true
			a.verifiedBytes.Store(a.bytes)
			a.verified.Store(k)
			a.mu.Lock()
			a.failure = &produceFailure{index: k, err: err, got: r.Offset}
			a.mu.Unlock()
			if a.onFailure != nil {
				a.onFailure()
			}
		}
	}
	if !failedNow && (k+1)%publishEvery != 0 && a.base+k+1 < a.producedEnd.Load() {
		return
	}
	if !a.failed {
		a.verifiedBytes.Store(a.bytes)
		a.verified.Store(k + 1)
	}
	a.done.Store(k + 1)
	if a.gate != nil {
		a.gate.release(k + 1 - a.released)
		a.released = k + 1
	}
	if !a.woken.Load() && !a.woken.Swap(true) {
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

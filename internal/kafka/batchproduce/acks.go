package batchproduce

import (
	"sync"
	"sync/atomic"
)

// Acks counts one session's produce results without a lock or a queue per
// batch. The batch producer calls a partition's promises one at a time, in
// the order the batches were produced, so the results count the copies in
// produce order, and a batch whose first copy is the k-th must land at
// destination offset base+k.
//
// The promise counts in plain fields that only it touches and publishes
// them to the worker (done, verified, verifiedBytes, then a wake-up) at
// each batch's result, so settling waits for nothing more than the results
// themselves.
type Acks struct {
	base int64 // destination offset of the session's first record
	// done counts published results; verified those before the first
	// failure, each at the offset it was meant for; verifiedBytes sums
	// their key and value bytes, stored before verified moves.
	done, verified atomic.Int64
	verifiedBytes  atomic.Int64
	// producedEnd is the destination offset after the last batch the
	// worker produced, set before it produces the batch, for the
	// destination watch.
	producedEnd atomic.Int64
	// results, bytes and failed are the promise's own counts.
	results, bytes int64
	failed         bool
	// woken is set when notify holds a wake-up the worker has not taken,
	// so a burst of results costs one channel send.
	woken  atomic.Bool
	notify chan struct{}

	mu      sync.Mutex
	failure *Failure // the first failure, nil while none

	// gate gets back the room of each published run of results; released
	// counts those given back so far (the promise's own).
	gate     *Gate
	released int64

	// onFailure runs at the first failure, in the promise, so that no later
	// record of the session is sent (see the mirroring session's produceCtx).
	onFailure func()
}

// Failure is the first result that was not a verified copy.
type Failure struct {
	Index int64 // in produce order, from 0
	Err   error // the produce error, or nil for a foreign write
	Got   int64 // the offset it landed at, for a foreign write
}

// NewAcks counts the results of records produced from destination offset
// base on. gate, when set, gets back the room of each published run;
// onFailure, when set, runs at the first failure, in the promise.
func NewAcks(base int64, gate *Gate, onFailure func()) *Acks {
	return &Acks{base: base, notify: make(chan struct{}, 1), gate: gate, onFailure: onFailure}
}

// Base is the destination offset of the session's first record.
func (a *Acks) Base() int64 { return a.base }

// Done counts the results published so far.
func (a *Acks) Done() int64 { return a.done.Load() }

// Verified counts the published results before the first failure, each a
// copy at the offset it was meant for.
func (a *Acks) Verified() int64 { return a.verified.Load() }

// VerifiedBytes sums the key and value bytes of the verified copies.
func (a *Acks) VerifiedBytes() int64 { return a.verifiedBytes.Load() }

// ProducedEnd is the destination offset after the last batch produced.
func (a *Acks) ProducedEnd() int64 { return a.producedEnd.Load() }

// SetProducedEnd records the destination offset after a batch, before any
// record of it is produced.
func (a *Acks) SetProducedEnd(end int64) { a.producedEnd.Store(end) }

// Notify receives a wake-up when results are published. Take, or Rearm,
// lets the next publication send another.
func (a *Acks) Notify() <-chan struct{} { return a.notify }

// Rearm lets the next publication send a wake-up, for a reader that does
// not Take.
func (a *Acks) Rearm() { a.woken.Store(false) }

// PromiseBatch is the result of a batch of n records produced whole (bytes
// of keys and values in all): it landed from destination offset base on,
// or failed with err. Batches of a partition are answered one at a time,
// in the order produced, as records are.
func (a *Acks) PromiseBatch(n, bytes, base int64, err error) {
	k := a.results
	a.results = k + n
	if !a.failed {
		if err == nil && base == a.base+k {
			a.bytes += bytes
		} else {
			a.failed = true
			a.verifiedBytes.Store(a.bytes)
			a.verified.Store(k)
			a.mu.Lock()
			a.failure = &Failure{Index: k, Err: err, Got: base}
			a.mu.Unlock()
			if a.onFailure != nil {
				a.onFailure()
			}
		}
	}
	if !a.failed {
		a.verifiedBytes.Store(a.bytes)
		a.verified.Store(k + n)
	}
	a.done.Store(k + n)
	if a.gate != nil {
		a.gate.Release(k + n - a.released)
		a.released = k + n
	}
	if !a.woken.Load() && !a.woken.Swap(true) {
		select {
		case a.notify <- struct{}{}:
		default:
		}
	}
}

// Take is the worker's side: how many results arrived and were verified,
// and the first failure if there was one.
func (a *Acks) Take() (done, verified int64, failure *Failure) {
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

package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Causes of a lease's context ending, readable with context.Cause.
var (
	// ErrLost: the lease was taken by another instance, vanished, or
	// passed its trust deadline without a successful renewal.
	ErrLost = errors.New("lease lost")
	// ErrReleased: this instance handed the lease back (rebalance or
	// shutdown) after stopping the worker.
	ErrReleased = errors.New("lease released")
)

// Key names a mirror partition. A mirror's metadata-sync lease uses
// a key with only Mirror set.
type Key struct {
	Mirror    string
	Topic     string
	Partition int32
}

// String is "mirror/topic/partition", the form used in __mirror_state keys.
func (k Key) String() string {
	return fmt.Sprintf("%s/%s/%d", k.Mirror, k.Topic, k.Partition)
}

// Lease is this instance's ownership of a mirror partition, or of a mirror's
// metadata sync, at one epoch. Every write a worker makes under it carries
// Owner and Epoch in its WHERE clause; Valid says whether the worker may still
// act on it at all.
//
// Trust is decided by the local monotonic clock, never by the database's
// expiry: each successful renewal moves the deadline to the time the attempt
// started + TTL − margin. The database expiry is now() + TTL measured later,
// so the holder always stops trusting the lease at least margin before
// another instance can take it.
type Lease struct {
	Key   Key
	Owner string
	Epoch int64
	// Previous is the instance that held the lease before this one took it
	// ("" if none, or unknown): a new owner says whom it took over from.
	Previous string

	mu       sync.Mutex
	deadline time.Time // carries a monotonic reading; compared only with time.Now()
	ended    bool
	timer    *time.Timer
	done     chan struct{}
	cancel   context.CancelCauseFunc
	onExpire func() // called (without mu) when the deadline passes
}

// newLease returns a lease trusted until deadline whose context, derived
// from parent, ends when the lease does.
func newLease(parent context.Context, key Key, owner string, epoch int64, deadline time.Time, onExpire func()) (*Lease, context.Context) {
	ctx, cancel := context.WithCancelCause(parent)
	l := &Lease{Key: key, Owner: owner, Epoch: epoch, deadline: deadline,
		done: make(chan struct{}), cancel: cancel, onExpire: onExpire}
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(deadline), l.expire)
	l.mu.Unlock()
	return l, ctx
}

// Valid reports whether the lease may still be trusted: it has not been
// lost or released and its deadline has not passed.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.ended && time.Now().Before(l.deadline)
}

// Deadline is when the lease stops being trusted unless renewed first.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done is closed when the lease is lost, expires or is released.
func (l *Lease) Done() <-chan struct{} { return l.done }

// String names the lease for logs.
func (l *Lease) String() string {
	if l.Key.Topic == "" {
		return fmt.Sprintf("mirror %s@%d", l.Key.Mirror, l.Epoch)
	}
	return fmt.Sprintf("%s@%d", l.Key, l.Epoch)
}

// logAttrs are the slog fields naming the lease.
func (l *Lease) logAttrs() []any {
	if l.Key.Topic == "" {
		return []any{"mirror", l.Key.Mirror, "epoch", l.Epoch}
	}
	return []any{"mirror", l.Key.Mirror, "topic", l.Key.Topic, "partition", l.Key.Partition, "epoch", l.Epoch}
}

// extend moves the deadline forward after a successful renewal. It reports
// false when the lease already ended: a renewal cannot revive it.
func (l *Lease) extend(deadline time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || !time.Now().Before(l.deadline) {
		return false
	}
	if deadline.After(l.deadline) {
		l.deadline = deadline
		l.timer.Reset(time.Until(deadline))
	}
	return true
}

// expire runs when the timer fires: the lease ends unless it was extended
// in the meantime.
func (l *Lease) expire() {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	if d := time.Until(l.deadline); d > 0 {
		l.timer.Reset(d)
		l.mu.Unlock()
		return
	}
	l.endLocked(fmt.Errorf("%w: trust deadline passed without renewal", ErrLost))
	l.mu.Unlock()
	if l.onExpire != nil {
		l.onExpire()
	}
}

// end marks the lease lost or released; it reports whether this call ended
// it.
func (l *Lease) end(cause error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return false
	}
	l.endLocked(cause)
	return true
}

func (l *Lease) endLocked(cause error) {
	l.ended = true
	l.timer.Stop()
	close(l.done)
	l.cancel(cause)
}

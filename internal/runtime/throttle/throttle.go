// Package throttle paces copies to a rate in bytes a second that can
// change while copies wait: a mirror's replication throttle
// (mirror.replication.throttled.rate).
//
// Each copy goes once the bytes let through before it have been allowed
// at the rate, so the first copy after a quiet spell goes at once and the
// rate holds over any window longer than one copy's bytes at the rate. A
// quiet spell saves no credit: a throttle that has been idle does not let
// a burst through.
//
// Copies belong to flows (a mirror's partitions), and when several wait,
// the next to go is the one whose flow has had the least so far, by
// start-time fair queueing: each copy's tag is the later of the throttle's
// virtual time and where its flow's last copy ended, and the lowest tag
// goes first. Order of arrival does not decide: a mirror's partitions are
// handed over by one goroutine per source broker, each waiting for one
// copy at a time, so first-come-first-served would share the rate per
// broker, and a broker leading one partition would give it as much as a
// broker leading twenty gives all of theirs.
package throttle

import (
	"context"
	"sync"
	"time"
)

// credit is how much idle time a throttle makes up for.
const credit = 200 * time.Millisecond

// Throttle is one rate limit shared by its waiters. The zero value has no
// limit.
type Throttle struct {
	mu sync.Mutex
	// rate is in bytes a second; 0 is no limit.
	rate float64
	// allowed counts the bytes the rate has allowed up to at; granted,
	// the bytes of the copies let through. The next copy goes once
	// allowed reaches granted.
	allowed, granted float64
	at               time.Time
	// vtime is the tag of the last copy let through; finish, where each
	// flow's last copy ended in tags; waiting, the copies that wait.
	vtime   float64
	finish  map[any]float64
	waiting map[*waiter]struct{}
	seq     uint64
	// changed is closed and replaced when the rate changes or the
	// waiters do, so that waiters look again at once.
	changed chan struct{}
}

// waiter is a copy waiting to go.
type waiter struct {
	tag float64
	seq uint64 // arrival order, among equal tags
}

func (w *waiter) before(o *waiter) bool {
	return w.tag < o.tag || w.tag == o.tag && w.seq < o.seq
}

// New returns a throttle at rate bytes a second (0: no limit).
func New(rate int64) *Throttle {
	t := &Throttle{}
	t.SetRate(rate)
	return t
}

// Rate returns the limit in bytes a second, 0 when there is none.
func (t *Throttle) Rate() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int64(t.rate)
}

// SetRate changes the limit; waiters see it at once. Bytes already allowed
// stay allowed, and what waiters still wait for is paced at the new rate.
func (t *Throttle) SetRate(rate int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if float64(rate) == t.rate {
		return
	}
	now := time.Now()
	t.advance(now)
	if t.rate == 0 {
		// No waiter waited while there was no limit: start level.
		t.allowed, t.at = t.granted, now
	}
	t.rate = max(float64(rate), 0)
	t.changedLocked()
}

func (t *Throttle) changedLocked() {
	if t.changed != nil {
		close(t.changed)
	}
	t.changed = make(chan struct{})
}

// advance moves allowed to now at the rate, never more than credit's
// worth past what was let through.
func (t *Throttle) advance(now time.Time) {
	if t.rate > 0 {
		t.allowed += t.rate * now.Sub(t.at).Seconds()
		t.allowed = min(t.allowed, t.granted+t.rate*credit.Seconds())
	} else {
		t.allowed = t.granted
	}
	t.at = now
}

// Wait is WaitFlow for a copy of no flow: it queues by arrival.
func (t *Throttle) Wait(ctx context.Context, done <-chan struct{}, n int64) (time.Duration, error) {
	return t.WaitFlow(ctx, done, nil, n)
}

// WaitFlow takes n bytes of flow (a comparable key; nil is a flow of its
// own each time) and returns once the copy may go: the bytes let through
// before it have been allowed, and no waiting copy comes before it in the
// fair order. It returns early when ctx ends or done is closed (with ctx's
// error, or ErrDone), its bytes not taken. It returns how long it waited.
func (t *Throttle) WaitFlow(ctx context.Context, done <-chan struct{}, flow any, n int64) (time.Duration, error) {
	start := time.Now()
	t.mu.Lock()
	if t.rate == 0 {
		t.mu.Unlock()
		return 0, nil
	}
	if t.finish == nil {
		t.finish, t.waiting = map[any]float64{}, map[*waiter]struct{}{}
	}
	t.seq++
	w := &waiter{tag: t.vtime, seq: t.seq}
	if flow != nil {
		w.tag = max(t.vtime, t.finish[flow])
	}
	t.waiting[w] = struct{}{}
	t.changedLocked()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := time.Now()
		t.advance(now)
		first := t.firstLocked() == w
		if first && t.allowed >= t.granted {
			t.letThroughLocked(w, flow, float64(n))
			t.mu.Unlock()
			return now.Sub(start), nil
		}
		changed := t.changed
		var wake <-chan time.Time
		if first && t.rate > 0 {
			d := time.Duration((t.granted - t.allowed) / t.rate * float64(time.Second))
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			wake = timer.C
		}
		t.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-changed:
		case <-ctx.Done():
			err = ctx.Err()
		case <-done:
			err = ErrDone
		}
		if timer != nil && wake == nil {
			timer.Stop()
		}
		t.mu.Lock()
		if t.rate == 0 {
			delete(t.waiting, w)
			t.changedLocked()
			t.mu.Unlock()
			return time.Since(start), nil
		}
		if err != nil {
			delete(t.waiting, w)
			t.changedLocked()
			t.mu.Unlock()
			return time.Since(start), err
		}
	}
}

// firstLocked is the waiter that goes next.
func (t *Throttle) firstLocked() *waiter {
	var first *waiter
	for w := range t.waiting {
		if first == nil || w.before(first) {
			first = w
		}
	}
	return first
}

// letThroughLocked lets w's n bytes through: the virtual time moves to its
// tag, its flow's next copy is tagged after its bytes, and the waiters look
// again.
func (t *Throttle) letThroughLocked(w *waiter, flow any, n float64) {
	delete(t.waiting, w)
	t.granted += n
	t.vtime = w.tag
	if flow != nil {
		t.finish[flow] = w.tag + n
	}
	// A flow whose last copy ended before the virtual time is tagged as a
	// new one would be: forget it, so that flows that left take no room.
	if len(t.finish) > 64 && len(t.finish) > 2*len(t.waiting) {
		for f, end := range t.finish {
			if end <= t.vtime {
				delete(t.finish, f)
			}
		}
	}
	t.changedLocked()
}

// ErrDone is Wait's error when its done channel was closed.
var ErrDone = errDone{}

type errDone struct{}

func (errDone) Error() string { return "the wait for the throttle was ended" }

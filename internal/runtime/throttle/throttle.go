// Package throttle paces copies to a rate in bytes a second that can
// change while copies wait: a mirror's replication throttle
// (mirror.replication.throttled.rate).
//
// Waiters are served in the order they arrive. Each copy reserves its bytes
// and goes once the bytes reserved before it have been allowed at the
// rate, so the first copy after a quiet spell goes at once and the rate
// holds over any window longer than one copy's bytes at the rate. A quiet
// spell saves no credit: a throttle that has been idle does not let a
// burst through.
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
	// allowed counts the bytes the rate has allowed up to at; reserved,
	// the bytes waiters have taken. A waiter goes once allowed reaches the
	// bytes reserved before it.
	allowed, reserved float64
	at                time.Time
	// changed is closed and replaced when the rate changes, so waiters
	// recompute their wait at once.
	changed chan struct{}
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
		t.allowed, t.at = t.reserved, now
	}
	t.rate = max(float64(rate), 0)
	if t.changed != nil {
		close(t.changed)
	}
	t.changed = make(chan struct{})
}

// advance moves allowed to now at the rate, never more than credit's
// worth past what is reserved.
func (t *Throttle) advance(now time.Time) {
	if t.rate > 0 {
		t.allowed += t.rate * now.Sub(t.at).Seconds()
		t.allowed = min(t.allowed, t.reserved+t.rate*credit.Seconds())
	} else {
		t.allowed = t.reserved
	}
	t.at = now
}

// Wait takes n bytes and returns once the bytes taken before them have
// been allowed, or when ctx ends or done is closed (with ctx's error, or
// ErrDone). It returns how long it waited.
func (t *Throttle) Wait(ctx context.Context, done <-chan struct{}, n int64) (time.Duration, error) {
	start := time.Now()
	t.mu.Lock()
	if t.rate == 0 {
		t.mu.Unlock()
		return 0, nil
	}
	t.advance(start)
	pos := t.reserved
	t.reserved += float64(n)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := time.Now()
		t.advance(now)
		if t.allowed >= pos {
			t.mu.Unlock()
			return now.Sub(start), nil
		}
		d := time.Duration((pos - t.allowed) / t.rate * float64(time.Second))
		changed := t.changed
		t.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		var err error
		select {
		case <-timer.C:
		case <-changed:
		case <-ctx.Done():
			err = ctx.Err()
		case <-done:
			err = ErrDone
		}
		t.mu.Lock()
		if err != nil {
			// The last reservation is given back; one with waiters behind
			// it stays taken, which delays them by its bytes at most.
			if t.reserved == pos+float64(n) {
				t.reserved = pos
			}
			t.mu.Unlock()
			return time.Since(start), err
		}
	}
}

// ErrDone is Wait's error when its done channel was closed.
var ErrDone = errDone{}

type errDone struct{}

func (errDone) Error() string { return "the wait for the throttle was ended" }

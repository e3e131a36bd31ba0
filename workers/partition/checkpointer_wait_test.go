package partition

import (
	"testing"
	"time"
)

// Early saves wait only to gather a burst while they are cheap, and space
// themselves out by what they cost: a save that took long makes the next
// catch-up wait catchUpShare times as long after it.
func TestCatchUpWait(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name      string
		lastStart time.Time
		lastTook  time.Duration
		want      time.Duration
	}{
		{"first catch-up", time.Time{}, 0, catchUpDelay},
		{"after a cheap save", now.Add(-5 * time.Millisecond), 2 * time.Millisecond, catchUpDelay},
		{"right after a 50 ms save", now.Add(-50 * time.Millisecond), 50 * time.Millisecond, 200 * time.Millisecond},
		{"long after a 50 ms save", now.Add(-time.Second), 50 * time.Millisecond, catchUpDelay},
	} {
		if got := catchUpWait(now, c.lastStart, c.lastTook); got != c.want {
			t.Errorf("%s: waits %s, want %s", c.name, got, c.want)
		}
	}
}

package partition

import (
	"testing"
	"time"
)

// TestOldestEntrySettled: when the refresh may skip reading a partition's
// oldest uncopied record, cell by cell. A timestamp read for src_next
// stands however the end moves; "caught up" and "no data record below the
// end" stand only while the end does not move; a failed read waits for its
// retry; a new lease or another src_next reads again.
func TestOldestEntrySettled(t *testing.T) {
	now := time.Now()
	read := oldestEntry{epoch: 3, src: 10, end: 15}
	none := oldestEntry{epoch: 3, src: 10, end: 15, none: true}
	caughtUp := oldestEntry{epoch: 3, src: 15, end: 15, caughtUp: true}
	failed := oldestEntry{epoch: 3, src: 10, end: 15, retryAt: now.Add(time.Second)}
	for _, c := range []struct {
		name            string
		en              oldestEntry
		epoch, src, end int64
		want            bool
	}{
		{"read, unchanged", read, 3, 10, 15, true},
		{"read, the end moved", read, 3, 10, 20, true},
		{"read, src_next not known yet", read, 3, -1, 20, true},
		{"read, src_next moved", read, 3, 11, 20, false},
		{"read, a new lease", read, 4, 10, 15, false},
		{"no data, unchanged", none, 3, 10, 15, true},
		{"no data, the end moved", none, 3, 10, 16, false},
		{"caught up, unchanged", caughtUp, 3, 15, 15, true},
		{"caught up, the end moved", caughtUp, 3, -1, 16, false},
		{"failed, before its retry", failed, 3, 10, 20, true},
		{"failed, at its retry", oldestEntry{epoch: 3, src: 10, end: 15, retryAt: now}, 3, 10, 15, false},
	} {
		if got := c.en.settled(c.epoch, c.src, c.end, now); got != c.want {
			t.Errorf("%s: settled %v, want %v", c.name, got, c.want)
		}
	}
}

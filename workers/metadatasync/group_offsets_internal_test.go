package metadatasync

import (
	"strings"
	"testing"
)

// TestClampOffset: a translated offset is committed as is inside the
// destination partition's log, [log start, end], and as the nearer bound
// outside it, with the reason.
func TestClampOffset(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		translated, start, end int64
		want                   int64
		reason                 string // a part of the reason; "" for none
	}{
		{"inside", 50, 10, 100, 50, ""},
		{"at the log start", 10, 10, 100, 10, ""},
		{"at the end", 100, 10, 100, 100, ""},
		{"empty log", 7, 7, 7, 7, ""},
		{"below the log start", 5, 10, 100, 10, "below the destination's log start 10 (retention or a deletion removed the records before it): committed 10"},
		{"below the log start of an emptied log", 5, 100, 100, 100, "below the destination's log start 100"},
		{"above the end", 120, 10, 100, 100, "above the destination's end offset 100 (the destination lost records that were mirrored): committed 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := clampOffset(tc.translated, tc.start, tc.end)
			if got != tc.want || (tc.reason == "") != (reason == "") || !strings.Contains(reason, tc.reason) {
				t.Fatalf("clampOffset(%d, %d, %d) = %d, %q; want %d, %q",
					tc.translated, tc.start, tc.end, got, reason, tc.want, tc.reason)
			}
		})
	}
}

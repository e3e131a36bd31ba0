package service

import "kmirror/repo"

// Translation is a source offset mapped to the destination.
type Translation struct {
	SourceOffset      int64 `json:"source_offset"`
	DestinationOffset int64 `json:"destination_offset"`
	// Exact is false when the source offset fell outside every mirrored run
	// and was rounded to the earlier side.
	Exact bool `json:"exact"`
}

// translateOffset maps a source offset ("the next record to read") to the
// destination with the runs around it. When the offset is not itself a
// mirrored record it rounds toward the earlier destination offset, so a
// consumer may see a duplicate but never skips a record; it never points
// past what has been mirrored. ok is false when nothing is mapped.
func translateOffset(n int64, before, after *repo.OffsetRun) (t Translation, ok bool) {
	t.SourceOffset = n
	switch {
	case before != nil && n < before.SrcStart+before.Count:
		t.DestinationOffset, t.Exact = before.DstStart+(n-before.SrcStart), true
	case before != nil:
		// In a gap (records that were never mirrored) or past the end.
		t.DestinationOffset = before.DstStart + before.Count
		t.Exact = after != nil && after.SrcStart == n
		if t.Exact {
			t.DestinationOffset = after.DstStart
		}
	case after != nil:
		t.DestinationOffset, t.Exact = after.DstStart, after.SrcStart == n
	default:
		return t, false
	}
	return t, true
}

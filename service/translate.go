package service

import (
	"context"

	"kmirror/repo"
)

// Translation is a source offset mapped to the destination.
type Translation struct {
	SourceOffset      int64 `json:"source_offset"`
	DestinationOffset int64 `json:"destination_offset"`
	// Exact is false when the source offset fell outside every mirrored run
	// and was rounded to the earlier side.
	Exact bool `json:"exact"`
}

// TopicTranslation is a Translation with the destination topic it is in.
type TopicTranslation struct {
	Translation
	// DestinationTopic is the mirror topic's destination name
	// (topic.name.prefix and the source name).
	DestinationTopic string
}

// roundDownAcrossTail applies a kept divergent tail to a translation of
// source offset n: the offset right after the overlap a failback continued
// from maps exactly to the first record copied after the tail, which would
// skip the tail. A consumer resuming there has not read the tail, so it is
// rounded down to the start of the gap the tail lies in, where the tail can
// be reprocessed: a duplicate is acceptable, a skipped record is not.
// Without a tail, or for any other offset, t is returned as it is.
func roundDownAcrossTail(ctx context.Context, q repo.DBTX, id repo.PartitionID, n int64, t Translation, tail *DivergentTail) (Translation, error) {
	if tail == nil || !t.Exact || n == 0 {
		return t, nil
	}
	// The runs around n−1: the overlap's last run, and the first one after.
	prev, next, err := repo.OffsetRunsAround(ctx, q, id.Mirror, id.Topic, id.Partition, n-1)
	if err != nil || prev == nil || next == nil || prev.SrcStart+prev.Count != n || next.SrcStart != n {
		return t, err
	}
	if gap := prev.DstStart + prev.Count; gap <= tail.Start && tail.End <= next.DstStart {
		t.DestinationOffset, t.Exact = gap, false
	}
	return t, nil
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

package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A source's bytes are input, not truth: a batch header that claims more
// records than its offsets hold, or offsets past what the partition has,
// would move the copy's position, and the destination's, past records it
// never copied. Fetched checks each header against what the fetch response
// says of the partition, in O(1) per batch and without reading the records,
// so the checks cost the whole-batch copy nothing it notices. Where a batch
// is decoded anyway (Reencode), its records are checked against its header
// as well.

// ErrCheck is a batch that fails a check of its header or its records.
var ErrCheck = errors.New("record batch fails a check")

// CheckError says which check a batch failed, and at which offset.
type CheckError struct {
	// Offset is the batch's base offset (for message formats v0 and v1,
	// its last offset).
	Offset int64
	// Check names what does not hold.
	Check string
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("the batch at offset %d fails a check: %s", e.Offset, e.Check)
}

func (e *CheckError) Unwrap() error { return ErrCheck }

func checkFailed(offset int64, format string, args ...any) *CheckError {
	return &CheckError{Offset: offset, Check: fmt.Sprintf(format, args...)}
}

// maxMagic is the newest message format.
const maxMagic = 2

// Fetched checks the batches Split cut from one partition's part of a
// fetch response, asked at offset position, against the response's high
// watermark:
//
//   - the message format is one Kafka defines (v0 to v2);
//   - a v2 batch's lastOffsetDelta is not negative, and its record count
//     is at most lastOffsetDelta+1 (compaction may leave fewer records,
//     and an empty batch, which Kafka keeps for its producer state, still
//     covers its offsets);
//   - each batch ends at or past position (a broker answers with the batch
//     that holds it and the ones after), and where atBoundary (position is
//     where the last batch read ended, not a resume point inside a batch)
//     none starts before it;
//   - each batch starts at or after the end of the one before;
//   - each batch's last offset is below the high watermark: a broker
//     serves nothing past it, so a base offset that jumped there, or a
//     count that reaches there, is not the log's.
//
// So every batch moves the position forward, and never past the log's end.
func Fetched(batches []Batch, position, highWatermark int64, atBoundary bool) error {
	next := position
	for i := range batches {
		b := &batches[i]
		if b.Magic < 0 || b.Magic > maxMagic {
			return checkFailed(b.BaseOffset, "message format v%d is none Kafka defines", b.Magic)
		}
		if b.BaseOffset < 0 {
			return checkFailed(b.BaseOffset, "negative base offset")
		}
		if b.LastOffsetDelta < 0 {
			return checkFailed(b.BaseOffset, "negative lastOffsetDelta %d", b.LastOffsetDelta)
		}
		if b.NumRecords < 0 || int64(b.NumRecords) > int64(b.LastOffsetDelta)+1 {
			return checkFailed(b.BaseOffset, "%d records in a batch whose offsets hold at most lastOffsetDelta+1 = %d",
				b.NumRecords, int64(b.LastOffsetDelta)+1)
		}
		last := b.BaseOffset + int64(b.LastOffsetDelta)
		if last < b.BaseOffset { // int64 overflow: a base offset near its top
			return checkFailed(b.BaseOffset, "lastOffsetDelta %d runs past the largest offset", b.LastOffsetDelta)
		}
		switch {
		case i == 0 && last < position:
			return checkFailed(b.BaseOffset, "it ends at offset %d, before the position %d asked for", last, position)
		case (i > 0 || atBoundary) && b.BaseOffset < next:
			return checkFailed(b.BaseOffset, "its base offset goes back: offsets up to %d were already read", next-1)
		}
		if last >= highWatermark {
			return checkFailed(b.BaseOffset, "its last offset %d is not below the high watermark %d", last, highWatermark)
		}
		next = last + 1
	}
	return nil
}

// PartialFirst reports a partial batch where a partition's part of a
// response begins: bytes that Split left out because they end before the
// batch they start does, with no whole batch before them. size is the
// batch's size as its header claims (0 when not even the header's length
// field is there). A broker cuts a partition's part at a size limit, so a
// batch larger than the limit arrives partial unless it comes first in the
// response (KIP-74); one that fits the limit never does.
func PartialFirst(in []byte) (partial bool, size int64) {
	if len(in) == 0 {
		return false, 0
	}
	if len(in) < offLength+4 {
		return true, 0
	}
	size = 12 + int64(int32(binary.BigEndian.Uint32(in[offLength:])))
	return size > int64(len(in)), size
}

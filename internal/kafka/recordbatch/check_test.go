package recordbatch_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"kmirror/internal/kafka/recordbatch"
)

// v2 is a batch header as Split reads it.
func v2(base int64, lastDelta, records int32) recordbatch.Batch {
	return recordbatch.Batch{BaseOffset: base, Magic: 2, LastOffsetDelta: lastDelta, NumRecords: records}
}

// TestFetchedChecks: each check of a fetched batch's header against the
// response, cell by cell, with the legitimate shapes that must pass
// (compaction's gaps and empty batches, a first batch that holds the
// position, message formats v0 and v1).
func TestFetchedChecks(t *testing.T) {
	for _, c := range []struct {
		name       string
		batches    []recordbatch.Batch
		position   int64
		hwm        int64
		atBoundary bool
		fails      string // "" passes
	}{
		{name: "batches in order", batches: []recordbatch.Batch{v2(10, 4, 5), v2(15, 4, 5)}, position: 10, hwm: 20, atBoundary: true},
		{name: "compaction gaps", batches: []recordbatch.Batch{v2(10, 9, 2)}, position: 10, hwm: 20, atBoundary: true},
		{name: "an empty batch kept for its producer", batches: []recordbatch.Batch{v2(10, 4, 0), v2(15, 0, 1)}, position: 10, hwm: 16, atBoundary: true},
		{name: "a gap between batches", batches: []recordbatch.Batch{v2(10, 0, 1), v2(30, 0, 1)}, position: 10, hwm: 31, atBoundary: true},
		{name: "the first batch holds a resume position", batches: []recordbatch.Batch{v2(5, 9, 10)}, position: 8, hwm: 15},
		{name: "the first batch starts after the position", batches: []recordbatch.Batch{v2(12, 0, 1)}, position: 10, hwm: 13, atBoundary: true},
		{name: "message formats v0 and v1", batches: []recordbatch.Batch{{BaseOffset: 10}, {BaseOffset: 14, Magic: 1}}, position: 10, hwm: 15, atBoundary: true},
		{name: "no batch", position: 10, hwm: 10},

		{name: "more records than offsets", batches: []recordbatch.Batch{v2(10, 0, 2147483647)}, position: 10, hwm: 20,
			fails: "2147483647 records in a batch whose offsets hold at most lastOffsetDelta+1 = 1"},
		{name: "negative record count", batches: []recordbatch.Batch{v2(10, 0, -1)}, position: 10, hwm: 20, fails: "-1 records"},
		{name: "negative lastOffsetDelta", batches: []recordbatch.Batch{v2(10, -1, 0)}, position: 10, hwm: 20, fails: "negative lastOffsetDelta -1"},
		{name: "last offset at the high watermark", batches: []recordbatch.Batch{v2(10, 10, 11)}, position: 10, hwm: 20,
			fails: "its last offset 20 is not below the high watermark 20"},
		{name: "2^31 offsets", batches: []recordbatch.Batch{v2(10, 2147483646, 2147483647)}, position: 10, hwm: 30,
			fails: "not below the high watermark"},
		{name: "a base offset that jumped", batches: []recordbatch.Batch{v2(10+1e12, 0, 1)}, position: 10, hwm: 30,
			fails: "its last offset 1000000000010 is not below the high watermark 30"},
		{name: "the largest base offset", batches: []recordbatch.Batch{v2(1<<63-1, 1, 1)}, position: 10, hwm: 30,
			fails: "runs past the largest offset"},
		{name: "a negative base offset", batches: []recordbatch.Batch{v2(-5, 0, 1)}, position: 10, hwm: 30, fails: "negative base offset"},
		{name: "a batch before the position", batches: []recordbatch.Batch{v2(5, 4, 5)}, position: 10, hwm: 30,
			fails: "it ends at offset 9, before the position 10"},
		{name: "an empty batch answered again", batches: []recordbatch.Batch{v2(10, 0, 0)}, position: 11, hwm: 30, atBoundary: true,
			fails: "before the position 11"},
		{name: "a batch that goes back", batches: []recordbatch.Batch{v2(10, 4, 5), v2(12, 4, 5)}, position: 10, hwm: 30,
			fails: "its base offset goes back: offsets up to 14 were already read"},
		{name: "a first batch before a batch boundary", batches: []recordbatch.Batch{v2(5, 9, 10)}, position: 8, hwm: 15, atBoundary: true,
			fails: "its base offset goes back"},
		{name: "an unknown message format", batches: []recordbatch.Batch{{BaseOffset: 10, Magic: 3}}, position: 10, hwm: 30,
			fails: "message format v3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := recordbatch.Fetched(c.batches, c.position, c.hwm, c.atBoundary)
			switch {
			case c.fails == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.fails != "" && err == nil:
				t.Fatalf("passed; want it to fail with %q", c.fails)
			case c.fails != "" && (!strings.Contains(err.Error(), c.fails) || !errors.Is(err, recordbatch.ErrCheck)):
				t.Fatalf("failed with %q; want %q (an ErrCheck)", err, c.fails)
			}
		})
	}
}

// TestPartialFirst: a part of a response that starts with the start of a
// batch says how large the batch claims to be.
func TestPartialFirst(t *testing.T) {
	whole := encodeBatch(t, batchSpec{base: 0, records: records(3, 10)})
	for _, c := range []struct {
		in      []byte
		partial bool
		size    int64
	}{
		{nil, false, 0},
		{whole, false, int64(len(whole))},
		{whole[:len(whole)-1], true, int64(len(whole))},
		{whole[:9], true, 0},
	} {
		if partial, size := recordbatch.PartialFirst(c.in); partial != c.partial || size != c.size {
			t.Errorf("%d bytes: partial %v size %d, want %v %d", len(c.in), partial, size, c.partial, c.size)
		}
	}
}

// TestSplitRefusesShortMessages: a v0 or v1 message shorter than its
// fixed fields is corrupt (FuzzPreparePartition found Split reading past
// one of 17 bytes).
func TestSplitRefusesShortMessages(t *testing.T) {
	for _, magic := range []byte{0, 1} {
		for _, size := range []int{17, 25, 33} {
			if magic == 0 && size > 25 {
				continue
			}
			in := make([]byte, size)
			binary.BigEndian.PutUint32(in[8:], uint32(size-12))
			in[16] = magic
			if _, err := recordbatch.Split(in); !errors.Is(err, recordbatch.ErrCorrupt) {
				t.Errorf("a v%d message of %d bytes: %v, want ErrCorrupt", magic, size, err)
			}
		}
	}
}

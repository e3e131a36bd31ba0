package recordbatch_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/recordbatch"
	"kmirror/internal/testing/legacyformat"
)

// bombLimit is the decompression bound of the bomb tests: small, so a
// bomb is cheap to build, and what the decoding allocated is easy to tell
// from it.
const bombLimit = 1 << 20

// TestReencodeBoundsDecompression: a batch that inflates past the bound
// fails a check, in every codec and in the old message formats, having
// allocated little more than the bound: one huge record is refused from
// its length before it is read, and many small ones stop at the bound.
func TestReencodeBoundsDecompression(t *testing.T) {
	huge := []kmsg.Record{{Value: make([]byte, 8*bombLimit)}}
	many := make([]kmsg.Record, 4*bombLimit/1024)
	for i := range many {
		many[i].Value = make([]byte, 1024)
	}
	for _, codec := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		for name, rs := range map[string][]kmsg.Record{"one huge record": huge, "many records": many} {
			// Offset gaps, so the batch is re-encoded rather than copied.
			raw := encodeBatch(t, batchSpec{base: 0, codec: codec, records: rs, gap: 1})
			batches, err := recordbatch.Split(raw)
			if err != nil || len(batches) != 1 {
				t.Fatalf("split: %v", err)
			}
			// Measured on a second bomb: the decoders, made once and kept,
			// are not the bomb's cost.
			codecs := recordbatch.Codecs{MaxInflated: bombLimit}
			_, _, _ = codecs.Reencode(nil, &batches[0], 0, batches[0].Codec(), 1, 0, 0)
			allocated := allocatedBy(func() {
				_, _, err = codecs.Reencode(nil, &batches[0], 0, batches[0].Codec(), 1, 0, 0)
			})
			var ce *recordbatch.CheckError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "decompress past the bound") {
				t.Errorf("%s, %s (%d bytes): %v; want it to fail the bound", batches[0].Codec(), name, len(raw), err)
			}
			// The records read so far (up to the bound) are re-encoded as
			// they come, so all the decoding allocates, garbage included,
			// is a few times the bound.
			if allocated > 4*bombLimit && !raceEnabled {
				t.Errorf("%s, %s: allocated %d bytes to refuse it; the bound is %d", batches[0].Codec(), name, allocated, bombLimit)
			}
		}
	}
	wrapper := legacyformat.GzipWrapper(0, []legacyformat.Record{{Value: make([]byte, 8*bombLimit)}})
	batches, err := recordbatch.Split(wrapper)
	if err != nil || len(batches) != 1 {
		t.Fatalf("split: %v", err)
	}
	codecs := recordbatch.Codecs{MaxInflated: bombLimit}
	if _, _, err := codecs.Reencode(nil, &batches[0], 0, recordbatch.Gzip, 1, 0, 0); !errors.Is(err, recordbatch.ErrCheck) ||
		!strings.Contains(err.Error(), "decompress past the bound") {
		t.Errorf("a gzip wrapper of 8 MiB: %v; want it to fail the bound", err)
	}
}

// allocatedBy is how many bytes f allocated on the heap.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestReencodeChecksRecords: a decoded batch's records must be what its
// header says: as many as its count, offset deltas increasing within
// [0, lastOffsetDelta].
func TestReencodeChecksRecords(t *testing.T) {
	rs := records(3, 10)
	for _, c := range []struct {
		name   string
		tamper func(h *kmsg.RecordBatch, deltas []int32)
		fails  string
	}{
		{name: "as encoded", tamper: func(*kmsg.RecordBatch, []int32) {}},
		{name: "fewer records than its count", tamper: func(h *kmsg.RecordBatch, _ []int32) { h.NumRecords = 4; h.LastOffsetDelta = 5 },
			fails: "3 records where its count says 4"},
		{name: "more records than its count", tamper: func(h *kmsg.RecordBatch, _ []int32) { h.NumRecords = 2 },
			fails: "more records than its count 2"},
		{name: "a delta past lastOffsetDelta", tamper: func(h *kmsg.RecordBatch, d []int32) { d[2] = 9 },
			fails: "record 2 has offset delta 9"},
		{name: "a delta that goes back", tamper: func(h *kmsg.RecordBatch, d []int32) { d[1] = 0 },
			fails: "record 1 has offset delta 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Deltas 0, 2, 4 (a compaction's gaps: the batch is decoded).
			deltas := []int32{0, 2, 4}
			h := kmsg.RecordBatch{FirstOffset: 100, Magic: 2, LastOffsetDelta: 4, FirstTimestamp: 1000, MaxTimestamp: 1000,
				ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 3}
			c.tamper(&h, deltas)
			for i, r := range rs {
				r.OffsetDelta, r.Length = deltas[i], 0
				body := r.AppendTo(nil)[1:]
				h.Records = append(binary.AppendVarint(h.Records, int64(len(body))), body...)
			}
			batches, err := recordbatch.Split(sealed(h))
			if err != nil || len(batches) != 1 {
				t.Fatalf("split: %v", err)
			}
			var codecs recordbatch.Codecs
			_, re, err := codecs.Reencode(nil, &batches[0], 0, recordbatch.None, 1, 0, 0)
			switch {
			case c.fails == "" && (err != nil || len(re.Sources) != 3):
				t.Fatalf("re-encoded %v, %v; want 3 records", re.Sources, err)
			case c.fails != "" && (err == nil || !strings.Contains(err.Error(), c.fails) || !errors.Is(err, recordbatch.ErrCheck)):
				t.Fatalf("re-encode: %v; want a check naming %q", err, c.fails)
			}
		})
	}
}

// sealed encodes a batch with its length and CRC.
func sealed(h kmsg.RecordBatch) []byte {
	out := h.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

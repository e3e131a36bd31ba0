package recordbatch_test

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/recordbatch"
	"kmirror/internal/testing/legacyformat"
)

// fuzzSeeds are fetched bytes of each shape the parsers meet: batches in
// every codec, compaction's gaps, old message formats, a partial tail,
// and headers a hostile source would send.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(),
		kgo.Lz4Compression(), kgo.ZstdCompression()} {
		seeds = append(seeds, encodeBatch(f, batchSpec{base: 5, codec: codec, records: records(3, 20)}))
		seeds = append(seeds, encodeBatch(f, batchSpec{base: 5, codec: codec, records: records(3, 20), gap: 2}))
	}
	two := append(encodeBatch(f, batchSpec{base: 0, records: records(2, 5)}), encodeBatch(f, batchSpec{base: 2, records: records(2, 5)})...)
	seeds = append(seeds, two, two[:len(two)-7])
	seeds = append(seeds, append(legacyformat.Message(0, 0, 3, 0, []byte("k"), []byte("v")),
		legacyformat.GzipWrapper(4, []legacyformat.Record{{Key: []byte("a"), Value: []byte("b"), Timestamp: 9}})...))
	short := make([]byte, 17) // a v0 message's length of 5: shorter than any message
	short[11] = 5
	seeds = append(seeds, short)
	for _, tamper := range []func(*kmsg.RecordBatch){
		func(h *kmsg.RecordBatch) { h.NumRecords = math.MaxInt32 },
		func(h *kmsg.RecordBatch) { h.LastOffsetDelta = -1 },
		func(h *kmsg.RecordBatch) { h.FirstOffset += 1e12 },
		func(h *kmsg.RecordBatch) { h.NumRecords, h.Records = 0, nil },
	} {
		h := kmsg.RecordBatch{FirstOffset: 5, Magic: 2, FirstTimestamp: 1, MaxTimestamp: 1, ProducerID: -1, ProducerEpoch: -1,
			FirstSequence: -1, NumRecords: 1}
		rs := records(1, 4)
		rs[0].Length = 0
		body := rs[0].AppendTo(nil)[1:]
		h.Records = append([]byte{byte(len(body) << 1)}, body...)
		tamper(&h)
		seeds = append(seeds, sealed(h))
	}
	return seeds
}

// FuzzSplit: whatever the bytes, Split and Fetched do not panic, and
// batches that pass Fetched each move the position forward and stay below
// the high watermark.
func FuzzSplit(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, int64(5), int64(100), false)
		f.Add(s, int64(6), int64(8), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, position, hwm int64, atBoundary bool) {
		batches, err := recordbatch.Split(in)
		if err != nil {
			return
		}
		if err := recordbatch.Fetched(batches, position, hwm, atBoundary); err != nil {
			return
		}
		next := position
		for i, b := range batches {
			if b.NextOffset() <= next {
				t.Fatalf("batch %d (%d to %d) does not move the position %d forward", i, b.BaseOffset, b.NextOffset(), next)
			}
			if b.NextOffset() > hwm {
				t.Fatalf("batch %d ends at %d, past the high watermark %d", i, b.NextOffset(), hwm)
			}
			if b.Magic == 2 && int64(b.NumRecords) > int64(b.LastOffsetDelta)+1 {
				t.Fatalf("batch %d holds %d records in %d offsets", i, b.NumRecords, b.LastOffsetDelta+1)
			}
			next = b.NextOffset()
		}
	})
}

// FuzzReencode: whatever a fetched batch holds, re-encoding it does not
// panic and stays within its bound, and what it builds is one batch of
// the records it names, from offset from on, in order, within the source
// batch's offsets.
func FuzzReencode(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, int64(0))
		f.Add(s, int64(6))
	}
	codecs := &recordbatch.Codecs{MaxInflated: 1 << 20}
	f.Fuzz(func(t *testing.T, in []byte, from int64) {
		batches, err := recordbatch.Split(in)
		if err != nil || recordbatch.Fetched(batches, 0, math.MaxInt64, false) != nil {
			return
		}
		for i := range batches {
			b := &batches[i]
			if b.Control() {
				continue
			}
			raw, re, err := codecs.Reencode(nil, b, from, b.Codec(), 1, 0, 0)
			if err != nil || len(re.Sources) == 0 {
				continue
			}
			out, err := recordbatch.Split(raw)
			if err != nil || len(out) != 1 || int(out[0].NumRecords) != len(re.Sources) {
				t.Fatalf("re-encoded into %d batches (%v) for %d records", len(out), err, len(re.Sources))
			}
			for j, src := range re.Sources {
				if src < from || (j > 0 && src <= re.Sources[j-1]) || src >= b.NextOffset() && b.Magic == 2 {
					t.Fatalf("sources %v: not increasing from %d within the batch's offsets [%d, %d)", re.Sources, from, b.BaseOffset, b.NextOffset())
				}
			}
		}
	})
}

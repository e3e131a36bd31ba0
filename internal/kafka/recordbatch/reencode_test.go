package recordbatch_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/recordbatch"
)

// decoded is a batch's records as absolute offsets and timestamps.
type decoded struct {
	offsets, timestamps []int64
	keys                []string
}

func decode(t *testing.T, raw []byte) (kmsg.RecordBatch, decoded) {
	t.Helper()
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	plain, err := kgo.DefaultDecompressor().Decompress(b.Records, kgo.CompressionCodecType(b.Attributes&7))
	if err != nil {
		t.Fatal(err)
	}
	var d decoded
	for range b.NumRecords {
		var r kmsg.Record
		if err := r.ReadFrom(plain); err != nil {
			t.Fatal(err)
		}
		// A record's size is its length varint and what it counts.
		size := int(r.Length) + len(varint(int64(r.Length)))
		plain = plain[size:]
		d.offsets = append(d.offsets, b.FirstOffset+int64(r.OffsetDelta))
		d.timestamps = append(d.timestamps, b.FirstTimestamp+r.TimestampDelta64)
		d.keys = append(d.keys, string(r.Key))
	}
	return b, d
}

func varint(v int64) []byte {
	var out []byte
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		out = append(out, byte(u)|0x80)
		u >>= 7
	}
	return append(out, byte(u))
}

// TestReencodeClosesCompactionGaps: a compacted batch is renumbered without
// gaps, keeps its records' keys and timestamps and says which source offset
// each came from; a broker then takes it.
func TestReencodeClosesCompactionGaps(t *testing.T) {
	t.Parallel()
	in := encodeBatch(t, batchSpec{base: 100, codec: kgo.ZstdCompression(), gap: 2, records: records(6, 50)})
	batches, err := recordbatch.Split(in)
	if err != nil {
		t.Fatal(err)
	}
	_, src := decode(t, in)
	var codecs recordbatch.Codecs
	out, re, err := codecs.Reencode(nil, &batches[0], 0, recordbatch.Zstd, 9, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{100, 103, 106, 109, 112, 115}; !slices.Equal(re.Sources, want) || !slices.Equal(src.offsets, want) {
		t.Fatalf("sources %v (batch %v), want %v", re.Sources, src.offsets, want)
	}
	again, err := recordbatch.Split(out)
	if err != nil || len(again) != 1 || again[0].WholeCopyProblem(0) != "" || again[0].Codec() != recordbatch.Zstd {
		t.Fatalf("the re-encoded batch: %+v, %v", again, err)
	}
	hdr, got := decode(t, out)
	if !slices.Equal(got.offsets, []int64{0, 1, 2, 3, 4, 5}) || !slices.Equal(got.keys, src.keys) ||
		!slices.Equal(got.timestamps, src.timestamps) || hdr.ProducerID != 9 || hdr.FirstSequence != 0 {
		t.Fatalf("re-encoded %+v (header %+v), source %+v", got, hdr, src)
	}

	dst := newCluster(t)
	pid, epoch := initProducer(t, dst)
	topics, err := kadm.NewClient(dst).ListTopics(t.Context(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	// As it is, the broker refuses it: its offset range is not its count.
	if err := produceRawErr(t, dst, "orders", topics["orders"].ID, 0, batches[0].AppendProduced(nil, pid, epoch, 0)); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("a batch with compaction gaps produced as it is: %v, want CORRUPT_MESSAGE", err)
	}
	out, _, err = codecs.Reencode(nil, &batches[0], 0, recordbatch.Zstd, pid, epoch, 0)
	if err != nil {
		t.Fatal(err)
	}
	produceRaw(t, dst, "orders", topics["orders"].ID, 0, out)
	recs, seen := consume(t, dst, "orders", 6)
	for i, r := range recs {
		if r.Offset != int64(i) || string(r.Key) != src.keys[i] || r.Timestamp.UnixMilli() != src.timestamps[i] {
			t.Fatalf("destination record %d: %s@%d %v", i, r.Key, r.Offset, r.Timestamp)
		}
	}
	if !slices.Equal(seen, []recordbatch.Codec{recordbatch.Zstd}) {
		t.Fatalf("destination codecs %v", seen)
	}
}

// TestReencodeFromAnOffset: a batch that starts before the copy's next
// offset keeps only the records from it; one entirely before appends
// nothing.
func TestReencodeFromAnOffset(t *testing.T) {
	in := encodeBatch(t, batchSpec{base: 10, codec: kgo.Lz4Compression(), records: records(5, 20)})
	batches, _ := recordbatch.Split(in)
	var codecs recordbatch.Codecs
	out, re, err := codecs.Reencode([]byte("x"), &batches[0], 13, recordbatch.Gzip, 1, 0, 7)
	if err != nil || !slices.Equal(re.Sources, []int64{13, 14}) || out[0] != 'x' {
		t.Fatalf("from 13: %v %v", re.Sources, err)
	}
	hdr, got := decode(t, out[1:])
	if hdr.Attributes&7 != int16(recordbatch.Gzip) || hdr.NumRecords != 2 || hdr.FirstSequence != 7 || !slices.Equal(got.keys, []string{"key-3", "key-4"}) {
		t.Fatalf("from 13: %+v %+v", hdr, got)
	}
	out, re, err = codecs.Reencode(nil, &batches[0], 15, recordbatch.Gzip, 1, 0, 7)
	if err != nil || len(out) != 0 || len(re.Sources) != 0 {
		t.Fatalf("from the batch's end: %d bytes, %v, %v", len(out), re.Sources, err)
	}
}

// TestReencodeLogAppendTime: a batch stamped with the source broker's
// append time gives every record that time as its own, stored as create
// time.
func TestReencodeLogAppendTime(t *testing.T) {
	in := encodeBatch(t, batchSpec{base: 0, codec: kgo.SnappyCompression(), attrs: 0x08, records: records(3, 20)})
	batches, _ := recordbatch.Split(in)
	var codecs recordbatch.Codecs
	out, _, err := codecs.Reencode(nil, &batches[0], 0, recordbatch.Snappy, 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	hdr, got := decode(t, out)
	if hdr.Attributes != int16(recordbatch.Snappy) || !slices.Equal(got.timestamps, []int64{1003, 1003, 1003}) {
		t.Fatalf("re-encoded %+v, timestamps %v, want the batch's max 1003 for each", hdr, got.timestamps)
	}
}

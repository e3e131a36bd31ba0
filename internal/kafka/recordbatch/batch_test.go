package recordbatch_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/recordbatch"
)

// batchSpec is a v2 batch for encodeBatch.
type batchSpec struct {
	base    int64
	codec   kgo.CompressionCodec
	attrs   int16 // bits beyond the codec
	records []kmsg.Record
	// gap spreads the records' offsets: record i is at offset i*(gap+1),
	// as compaction can leave them.
	gap int32
}

// encodeBatch builds the batch's bytes as a broker stores them.
func encodeBatch(t testing.TB, s batchSpec) []byte {
	t.Helper()
	var raw []byte
	for i := range s.records {
		r := s.records[i]
		r.OffsetDelta = int32(i) * (s.gap + 1)
		r.Length = 0
		body := r.AppendTo(nil)[1:] // the length varint 0 is one byte
		raw = binary.AppendVarint(raw, int64(len(body)))
		raw = append(raw, body...)
	}
	data, codec := compress(t, s.codec, raw)
	n := int32(len(s.records))
	b := kmsg.RecordBatch{FirstOffset: s.base, PartitionLeaderEpoch: 3, Magic: 2, Attributes: int16(codec) | s.attrs,
		LastOffsetDelta: (n - 1) * (s.gap + 1), FirstTimestamp: 1000, MaxTimestamp: 1000 + int64(n),
		ProducerID: 7, ProducerEpoch: 1, FirstSequence: 40, NumRecords: n, Records: data}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// compress is kgo's compression of raw with codec.
func compress(t testing.TB, codec kgo.CompressionCodec, raw []byte) ([]byte, kgo.CompressionCodecType) {
	return compressor(t, codec)(raw)
}

// compressor returns a function that compresses with codec, reusing one
// compressor as a producer does.
func compressor(t testing.TB, codec kgo.CompressionCodec) func([]byte) ([]byte, kgo.CompressionCodecType) {
	comp, err := kgo.DefaultCompressor(codec)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	return func(raw []byte) ([]byte, kgo.CompressionCodecType) {
		if comp == nil {
			return raw, kgo.CodecNone
		}
		buf.Reset()
		return comp.Compress(&buf, raw)
	}
}

// records returns n records with values of size bytes drawn from 16
// letters: they compress about 2:1, as text does.
func records(n, size int) []kmsg.Record {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]kmsg.Record, n)
	for i := range out {
		v := make([]byte, size)
		for j := range v {
			v[j] = 'a' + byte(rng.IntN(16))
		}
		out[i] = kmsg.Record{TimestampDelta64: int64(i), Key: fmt.Appendf(nil, "key-%d", i), Value: v}
	}
	return out
}

// TestSplitLeavesAPartialTail: a response cut inside its last batch yields
// the whole batches before it.
func TestSplitLeavesAPartialTail(t *testing.T) {
	a := encodeBatch(t, batchSpec{base: 0, codec: kgo.NoCompression(), records: records(3, 10)})
	b := encodeBatch(t, batchSpec{base: 3, codec: kgo.Lz4Compression(), records: records(4, 10)})
	in := append(append([]byte{}, a...), b[:len(b)-5]...)
	got, err := recordbatch.Split(in)
	if err != nil || len(got) != 1 || got[0].BaseOffset != 0 || got[0].NumRecords != 3 || got[0].NextOffset() != 3 {
		t.Fatalf("split of a response cut in its second batch: %+v, %v", got, err)
	}
	got, err = recordbatch.Split(append(append([]byte{}, a...), b...))
	if err != nil || len(got) != 2 || got[1].Codec() != recordbatch.LZ4 || got[1].BaseOffset != 3 || got[1].NextOffset() != 7 {
		t.Fatalf("split of two batches: %+v, %v", got, err)
	}
}

// TestWholeCopyProblem: the batches a broker would refuse or restamp as
// produced are named, and only those.
func TestWholeCopyProblem(t *testing.T) {
	cases := []struct {
		name string
		spec batchSpec
		from int64
		want string
	}{
		{"a plain batch", batchSpec{base: 10, codec: kgo.ZstdCompression()}, 10, ""},
		{"compaction gaps", batchSpec{base: 10, codec: kgo.ZstdCompression(), gap: 2}, 0, "offset gaps left by compaction"},
		{"log-append time", batchSpec{base: 10, codec: kgo.NoCompression(), attrs: 0x08}, 0, "log-append timestamps"},
		{"a delete horizon", batchSpec{base: 10, codec: kgo.NoCompression(), attrs: 0x40}, 0, "a compaction delete horizon"},
		{"starts before the next offset", batchSpec{base: 10, codec: kgo.SnappyCompression()}, 11, "starts before the copy's next offset"},
	}
	for _, c := range cases {
		c.spec.records = records(5, 20)
		got, err := recordbatch.Split(encodeBatch(t, c.spec))
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %v", c.name, err)
		}
		if why := got[0].WholeCopyProblem(c.from); why != c.want {
			t.Errorf("%s: %q, want %q", c.name, why, c.want)
		}
	}
	// A message set of format v1: only its offset and magic are read.
	legacy := make([]byte, 40)
	binary.BigEndian.PutUint64(legacy, 5)
	binary.BigEndian.PutUint32(legacy[8:], 28)
	legacy[16] = 1
	got, err := recordbatch.Split(legacy)
	if err != nil || len(got) != 1 || got[0].WholeCopyProblem(0) != "message format v1" {
		t.Fatalf("a v1 message: %+v, %v", got, err)
	}
}

// TestAppendProduced: only the header changes; the records' bytes are the
// source's, and the CRC holds.
func TestAppendProduced(t *testing.T) {
	in := encodeBatch(t, batchSpec{base: 500, codec: kgo.GzipCompression(), attrs: 0x10, records: records(8, 30)})
	got, err := recordbatch.Split(in)
	if err != nil {
		t.Fatal(err)
	}
	out := got[0].AppendProduced([]byte("prefix"), 99, 4, 1234)
	if string(out[:6]) != "prefix" {
		t.Fatal("the destination slice's bytes were overwritten")
	}
	var b kmsg.RecordBatch
	if err := b.ReadFrom(out[6:]); err != nil {
		t.Fatal(err)
	}
	if b.FirstOffset != 0 || b.PartitionLeaderEpoch != -1 || b.ProducerID != 99 || b.ProducerEpoch != 4 || b.FirstSequence != 1234 ||
		b.Attributes != int16(recordbatch.Gzip) || b.NumRecords != 8 || b.LastOffsetDelta != 7 || b.FirstTimestamp != 1000 {
		t.Fatalf("produced header %+v", b)
	}
	if !bytes.Equal(out[6+61:], in[61:]) {
		t.Fatal("the records' bytes changed")
	}
	again, err := recordbatch.Split(out[6:])
	if err != nil || len(again) != 1 {
		t.Fatalf("the produced batch does not split (CRC): %v", err)
	}
	// Produced writes the same bytes over the batch's own.
	if own := got[0].Produced(99, 4, 1234); !bytes.Equal(own, out[6:]) || &own[0] != &got[0].Raw[0] {
		t.Fatal("Produced differs from AppendProduced, or copied")
	}
}

// TestProducedLargeBatch: past the size from which the CRC is updated
// rather than computed, the produced batch's CRC still holds.
func TestProducedLargeBatch(t *testing.T) {
	in := encodeBatch(t, batchSpec{base: 7, codec: kgo.NoCompression(), attrs: 0x10, records: records(64, 1024)})
	got, err := recordbatch.Split(in)
	if err != nil || len(in) < 64<<10 {
		t.Fatalf("%d bytes: %v", len(in), err)
	}
	out := got[0].Produced(1<<40+3, 7, 1<<30)
	again, err := recordbatch.Split(out)
	if err != nil || len(again) != 1 || again[0].ProducerID != 1<<40+3 || again[0].BaseSequence != 1<<30 || again[0].Transactional() {
		t.Fatalf("the produced batch: %+v, %v", again, err)
	}
}

// The benchmarks compare a whole-batch copy's work on one batch (check the
// CRC, rewrite the header, compute the CRC again) with the codec work the
// record path does on it (decompress, decode every record, encode them
// again, compress). b.SetBytes is the batch's uncompressed size, so MB/s
// compare per megabyte of records. The record path's client-side costs
// (record objects, partitioning, buffering) come on top of this.

func benchBatch(b *testing.B, codec kgo.CompressionCodec, size int) []byte {
	n := 16 * 1024 / size // a 16 KiB batch, kgo's default size
	return encodeBatch(b, batchSpec{codec: codec, records: records(n, size)})
}

var benchCodecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}, {"none", kgo.NoCompression()}}

func BenchmarkWholeBatchCopy(b *testing.B) {
	for _, c := range benchCodecs {
		for _, size := range []int{100, 1024} {
			b.Run(fmt.Sprintf("%s/%dB", c.name, size), func(b *testing.B) {
				in := benchBatch(b, c.codec, size)
				b.SetBytes(int64(uncompressedSize(b, in)))
				var out []byte
				for b.Loop() {
					got, err := recordbatch.Split(in)
					if err != nil {
						b.Fatal(err)
					}
					out = got[0].AppendProduced(out[:0], 1, 0, 0)
				}
			})
		}
	}
}

func BenchmarkRecordPathCodecWork(b *testing.B) {
	dec := kgo.DefaultDecompressor()
	for _, c := range benchCodecs {
		for _, size := range []int{100, 1024} {
			b.Run(fmt.Sprintf("%s/%dB", c.name, size), func(b *testing.B) {
				in := benchBatch(b, c.codec, size)
				b.SetBytes(int64(uncompressedSize(b, in)))
				compress := compressor(b, c.codec)
				var raw []byte
				for b.Loop() {
					var batch kmsg.RecordBatch
					if err := batch.ReadFrom(in); err != nil {
						b.Fatal(err)
					}
					plain, err := dec.Decompress(batch.Records, kgo.CompressionCodecType(batch.Attributes&7))
					if err != nil {
						b.Fatal(err)
					}
					raw = raw[:0]
					for len(plain) > 0 {
						var r kmsg.Record
						if err := r.ReadFrom(plain); err != nil {
							b.Fatal(err)
						}
						l, k := binary.Varint(plain)
						plain = plain[k+int(l):]
						raw = r.AppendTo(raw)
					}
					compress(raw)
				}
			})
		}
	}
}

// uncompressedSize is the size of a batch's records before compression.
func uncompressedSize(b *testing.B, in []byte) int {
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(in); err != nil {
		b.Fatal(err)
	}
	plain, err := kgo.DefaultDecompressor().Decompress(batch.Records, kgo.CompressionCodecType(batch.Attributes&7))
	if err != nil {
		b.Fatal(err)
	}
	return len(plain)
}

// TestFirstRecordTimestamp: a batch's first record reads the batch's first
// timestamp, or, stamped with log-append time, the broker's append time
// (the max timestamp) as every record of it does.
func TestFirstRecordTimestamp(t *testing.T) {
	for _, c := range []struct {
		name  string
		attrs int16
		want  int64
	}{
		{"create time", 0, 1000},
		{"log-append time", 0x08, 1003},
	} {
		bs, err := recordbatch.Split(encodeBatch(t, batchSpec{base: 10, codec: kgo.NoCompression(), attrs: c.attrs, records: records(3, 20)}))
		if err != nil || len(bs) != 1 {
			t.Fatalf("%s: %d batches, %v", c.name, len(bs), err)
		}
		if got := bs[0].FirstRecordTimestamp(); got != c.want {
			t.Errorf("%s: first record's timestamp %d, want %d", c.name, got, c.want)
		}
	}
}

package recordbatch_test

import (
	"slices"
	"testing"

	"kmirror/internal/kafka/recordbatch"
	"kmirror/internal/testing/legacyformat"
)

// TestReencodeLegacyMessageFormats: message sets older than v2 (brokers
// before 4.0 serve topics written in them) are the one case that cannot
// be copied as batches: they are read by kgo and built again as v2
// batches, keeping keys, values, offsets (as the sources of the offset
// map) and timestamps, and the wrapper's codec. A v0 message has no
// timestamp: v2 writes -1.
func TestReencodeLegacyMessageFormats(t *testing.T) {
	in := legacyformat.Message(0, 0, 3, 0, []byte("k3"), []byte("v3"))
	in = append(in, legacyformat.Message(1, 0, 7, 1700, []byte("k7"), []byte("v7"))...)
	in = append(in, legacyformat.GzipWrapper(8, []legacyformat.Record{
		{Key: []byte("k8"), Value: []byte("v8"), Timestamp: 1800},
		{Key: []byte("k9"), Value: []byte("v9"), Timestamp: 1801},
		{Key: []byte("k10"), Value: []byte("v10"), Timestamp: 1802},
	})...)
	batches, err := recordbatch.Split(in)
	if err != nil || len(batches) != 3 {
		t.Fatalf("split: %d batches, %v", len(batches), err)
	}
	if next := batches[2].NextOffset(); next != 11 || batches[2].Codec() != recordbatch.Gzip {
		t.Fatalf("the wrapper: next offset %d, codec %s; want 11, gzip", next, batches[2].Codec())
	}
	var codecs recordbatch.Codecs
	for _, c := range []struct {
		batch      int
		from       int64
		sources    []int64
		keys       []string
		timestamps []int64
	}{
		{0, 0, []int64{3}, []string{"k3"}, []int64{-1}},
		{1, 0, []int64{7}, []string{"k7"}, []int64{1700}},
		{2, 0, []int64{8, 9, 10}, []string{"k8", "k9", "k10"}, []int64{1800, 1801, 1802}},
		{2, 9, []int64{9, 10}, []string{"k9", "k10"}, []int64{1801, 1802}},
	} {
		b := batches[c.batch]
		if why := b.WholeCopyProblem(c.from); why == "" {
			t.Fatalf("batch %d can be copied whole?", c.batch)
		}
		raw, re, err := codecs.Reencode(nil, &b, c.from, b.Codec(), 42, 1, 5)
		if err != nil {
			t.Fatalf("batch %d from %d: %v", c.batch, c.from, err)
		}
		hdr, d := decode(t, raw)
		if !slices.Equal(re.Sources, c.sources) || !slices.Equal(d.keys, c.keys) || !slices.Equal(d.timestamps, c.timestamps) {
			t.Fatalf("batch %d from %d: sources %v keys %v timestamps %v", c.batch, c.from, re.Sources, d.keys, d.timestamps)
		}
		if hdr.Magic != 2 || hdr.ProducerID != 42 || hdr.FirstSequence != 5 || recordbatch.Codec(hdr.Attributes&7) != b.Codec() {
			t.Fatalf("batch %d: header %+v", c.batch, hdr)
		}
		if again, err := recordbatch.Split(raw); err != nil || len(again) != 1 {
			t.Fatalf("batch %d: the v2 batch does not split (CRC): %v", c.batch, err)
		}
	}
	// A damaged message is refused, not copied.
	bad := slices.Clone(in)
	bad[len(bad)-1] ^= 0xff
	batches, _ = recordbatch.Split(bad)
	if _, _, err := codecs.Reencode(nil, &batches[2], 0, recordbatch.Gzip, 42, 1, 5); err == nil {
		t.Fatal("a damaged wrapper was re-encoded")
	}
}

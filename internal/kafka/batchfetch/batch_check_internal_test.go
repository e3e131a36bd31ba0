package batchfetch

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/leaders"
	"kmirror/internal/kafka/recordbatch"
)

// testLoop is a broker loop fetching one partition, tp, from offset, as
// prepare finds it after a request.
func testLoop(offset int64) (*brokerLoop, *partition, leaders.TopicPartition) {
	f := &Fetcher{cfg: Config{MaxBytes: 4 << 20, PartitionMaxBytes: 1 << 20, PieceBytes: 256 << 10,
		RetryBackoff: 250 * time.Millisecond, MaxRetryBackoff: 5 * time.Second},
		parts: map[leaders.TopicPartition]*partition{}, unassigned: map[leaders.TopicPartition]*partition{}}
	f.cond = sync.NewCond(&f.mu)
	b := newBrokerLoop(f, 0)
	tp := leaders.TopicPartition{Topic: "t", Partition: 0}
	p := &partition{tp: tp, offset: offset, lastEpoch: -1, broker: 0, boundary: true}
	f.parts[tp] = p
	b.assigned[tp] = leaders.Leader{}
	return b, p, tp
}

// batchAt is a v2 batch of n plain records from base.
func batchAt(base int64, n int32) []byte {
	h := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: n - 1, FirstTimestamp: 1, MaxTimestamp: 1,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: n}
	for i := range n {
		r := kmsg.Record{OffsetDelta: i, Value: []byte("v")}
		body := r.AppendTo(nil)[1:]
		h.Records = append(binary.AppendVarint(h.Records, int64(len(body))), body...)
	}
	out := h.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// answer is a partition's part of a response.
func answer(records []byte, hwm int64) *kmsg.FetchResponseTopicPartition {
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = hwm, hwm, records
	return &rp
}

// TestPartialFirstBatch: a partition's part that holds only the start of
// a batch is asked for again once with room for the batch when the batch
// is larger than the bytes asked, fails when it comes partial again or
// when the bytes asked would have held it, and waits for the next response
// when the response was full before it.
func TestPartialFirstBatch(t *testing.T) {
	big := batchAt(10, 1)
	binary.BigEndian.PutUint32(big[8:], 2<<20) // claims 2 MiB
	b, p, tp := testLoop(10)
	r := requested{p: p, offset: 10, epoch: -1, maxBytes: 1 << 20}
	if ps := b.prepare(tp, r, answer(big, 20), 0); ps != nil || p.wantBytes != 2<<20+12 || p.stopped {
		t.Fatalf("a partial 2 MiB batch with 1 MiB asked: pieces %v, want bytes %d, stopped %v; want it asked for again with room",
			ps, p.wantBytes, p.stopped)
	}
	if _, changed := b.changed[tp]; !changed {
		t.Fatal("the partition is not asked for again")
	}
	r.maxBytes = p.maxBytes(b.f.cfg.PartitionMaxBytes)
	ps := b.prepare(tp, r, answer(big, 20), 0)
	var bad *BadBatchError
	if ps == nil || !errors.As(ps.rest[0].Err, &bad) || !strings.Contains(bad.Error(), "would hold it whole") || !p.stopped {
		t.Fatalf("partial again with room asked: %+v; want a BadBatchError and the partition stopped", ps)
	}

	whole := batchAt(10, 3)
	b, p, tp = testLoop(10)
	r = requested{p: p, offset: 10, epoch: -1, maxBytes: 1 << 20}
	if ps := b.prepare(tp, r, answer(whole[:len(whole)-4], 20), 0); ps == nil || !errors.As(ps.rest[0].Err, &bad) {
		t.Fatalf("a small batch sent partial: %+v; want a BadBatchError", ps)
	}
	b, p, tp = testLoop(10)
	r = requested{p: p, offset: 10, epoch: -1, maxBytes: 1 << 20}
	if ps := b.prepare(tp, r, answer(whole[:len(whole)-4], 20), int(b.f.cfg.MaxBytes)-10); ps == nil || ps.rest[0].Err != nil || p.stopped {
		t.Fatalf("a batch cut by a full response: %+v; want no error, fetched again", ps)
	}
}

// TestBadBatchDeliversNothing: a response whose second batch fails a
// check hands on an error and no batch, and the position stays.
func TestBadBatchDeliversNothing(t *testing.T) {
	b, p, tp := testLoop(10)
	in := append(batchAt(10, 3), batchAt(11, 3)...) // goes back
	ps := b.prepare(tp, requested{p: p, offset: 10, epoch: -1, maxBytes: 1 << 20}, answer(in, 20), 0)
	var bad *BadBatchError
	if ps == nil || len(ps.rest) != 1 || len(ps.rest[0].Batches) != 0 || !errors.As(ps.rest[0].Err, &bad) || bad.Offset != 11 ||
		!errors.Is(bad, recordbatch.ErrCheck) || p.offset != 10 {
		t.Fatalf("pieces %+v, position %d; want one error naming offset 11 and no batch, at 10", ps, p.offset)
	}
}

// TestRetryBackoff: a broker loop's waits double from RetryBackoff to
// MaxRetryBackoff, less up to a fifth.
func TestRetryBackoff(t *testing.T) {
	b, _, _ := testLoop(0)
	for failures, want := range map[int]time.Duration{1: 250 * time.Millisecond, 2: 500 * time.Millisecond,
		3: time.Second, 5: 4 * time.Second, 6: 5 * time.Second, 100: 5 * time.Second} {
		b.failures = failures
		if got := b.backoff(); got > want || got < want-want/5 {
			t.Errorf("after %d failures: %v, want %v less up to a fifth", failures, got, want)
		}
	}
}

// FuzzPreparePartition: whatever a partition's part of a response holds,
// prepare does not panic; what it hands on is either an error and no
// batch, or batches that each move the position forward and stay below the
// high watermark, and the position only moves forward.
func FuzzPreparePartition(f *testing.F) {
	two := append(batchAt(10, 3), batchAt(13, 2)...)
	for _, s := range [][]byte{two, two[:len(two)-5], batchAt(5, 10), batchAt(10, 1)[:30], nil} {
		f.Add(s, int64(10), int64(20), true, 0)
		f.Add(s, int64(7), int64(15), false, 100)
	}
	f.Fuzz(func(t *testing.T, in []byte, offset, hwm int64, boundary bool, before int) {
		b, p, tp := testLoop(offset)
		p.boundary = boundary
		ps := b.prepare(tp, requested{p: p, offset: offset, epoch: -1, maxBytes: 1 << 20}, answer(in, hwm), before)
		if p.offset < offset {
			t.Fatalf("the position went back from %d to %d", offset, p.offset)
		}
		if ps == nil {
			return
		}
		next := offset
		for _, piece := range ps.rest {
			if piece.Err != nil {
				if len(piece.Batches) != 0 || !p.stopped {
					t.Fatalf("an error (%v) with %d batches, stopped %v", piece.Err, len(piece.Batches), p.stopped)
				}
				continue
			}
			for _, bt := range piece.Batches {
				if bt.NextOffset() <= next || bt.NextOffset() > hwm {
					t.Fatalf("a batch from %d to %d after %d, high watermark %d", bt.BaseOffset, bt.NextOffset(), next, hwm)
				}
				next = bt.NextOffset()
			}
		}
	})
}

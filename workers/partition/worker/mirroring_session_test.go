package worker

import (
	"errors"
	"testing"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/recordbatch"
)

// TestAckedBytesAreExact: the promise publishes each batch's result with
// its bytes, and the worker counts every verified copy and byte exactly
// once: when the worker has produced the next batch before the result of
// the previous one arrives, when results arrive between two of its
// handleAcks, and when a copy fails (what lands after it is never verified).
func TestAckedBytesAreExact(t *testing.T) {
	s := &session{acks: batchproduce.NewAcks(10, nil, nil), produced: 10}
	produceRun := func(n int64) { // the worker's side of a batch
		s.pending = append(s.pending, pendingRun{src: s.produced, dst: s.produced, n: n})
		s.acks.SetProducedEnd(s.produced + n)
		s.produced += n
	}
	check := func(what string, taken, bytes, inFlight int64) {
		t.Helper()
		s.handleAcks()
		if s.taken != taken || s.countedBytes != bytes || s.inFlight() != inFlight {
			t.Fatalf("%s: taken %d, bytes %d, in flight %d; want %d, %d, %d", what,
				s.taken, s.countedBytes, s.inFlight(), taken, bytes, inFlight)
		}
	}

	produceRun(3) // offsets 10..12
	check("nothing answered yet", 0, 0, 3)
	produceRun(2) // offsets 13..14 before the first batch is answered
	s.acks.PromiseBatch(3, 600, 10, nil)
	check("the first batch answered, the second in flight", 3, 600, 2)
	s.acks.PromiseBatch(2, 400, 13, nil)
	produceRun(4) // offsets 15..18
	s.acks.PromiseBatch(4, 800, 15, nil)
	check("two batches answered between two looks", 9, 1800, 0)

	produceRun(2) // offsets 19..20: land
	produceRun(3) // offsets 21..23: fail
	produceRun(1) // offset 24: lands, but after a failure
	s.acks.PromiseBatch(2, 200, 19, nil)
	s.acks.PromiseBatch(3, 300, 0, errors.New("broker down"))
	s.acks.PromiseBatch(1, 100, 21, nil)
	if s.handleAcks(); s.taken != 11 || s.countedBytes != 2000 || s.failure == nil {
		t.Fatalf("after the failure: taken %d, bytes %d, failure %v", s.taken, s.countedBytes, s.failure)
	}
	if s.inFlight() != 0 {
		t.Fatalf("%d still in flight once every batch is answered", s.inFlight())
	}
}

// TestOldestUncopiedFromBatches: the session knows the oldest record not yet
// on the destination from the batches it copied and has not seen
// acknowledged: the first one's first timestamp, for its srcNext. Markers
// before it are no data; once every copy is acknowledged it knows nothing
// (caught up, or the next records not fetched yet).
func TestOldestUncopiedFromBatches(t *testing.T) {
	s := &session{acks: batchproduce.NewAcks(0, nil, nil)}
	copyBatch := func(src, n, ts int64) { // the worker's side of a data batch
		s.pending = append(s.pending, pendingRun{src: src, dst: s.produced, n: n})
		s.stamps = append(s.stamps, batchStamp{src: src, next: src + n, ts: ts})
		s.acks.SetProducedEnd(s.produced + n)
		s.produced += n
	}
	check := func(what string, src, ts int64) {
		t.Helper()
		s.handleAcks()
		o := s.oldest()
		switch {
		case ts < 0 && o != nil:
			t.Fatalf("%s: oldest %+v at %v, want none", what, o, o.At)
		case ts >= 0 && (o == nil || o.Src != src || o.At == nil || o.At.UnixMilli() != ts):
			t.Fatalf("%s: oldest %+v, want source offset %d stamped %d", what, o, src, ts)
		}
	}
	check("nothing copied", 0, -1)
	// A marker (offset 0), then batches at 1..3 and 4..5.
	s.pending = append(s.pending, pendingRun{src: 0, n: 1, control: true})
	copyBatch(1, 3, 1000)
	copyBatch(4, 2, 2000)
	check("the marker passed: the first batch's first record", 1, 1000)
	s.acks.PromiseBatch(3, 30, 0, nil)
	check("the first batch acknowledged", 4, 2000)
	s.acks.PromiseBatch(2, 20, 3, nil)
	check("every copy acknowledged", 6, -1)
	// A fetched batch that waits for the throttle, nothing unacknowledged.
	s.fetchNext = 6
	s.noteWaiting(FetchBatch{Batches: []recordbatch.Batch{{BaseOffset: 6, LastOffsetDelta: 1, FirstTimestamp: 3000, MaxTimestamp: 3001}}})
	check("a batch waiting for the throttle", 6, 3000)
	s.waiting = nil
	s.noteWaiting(FetchBatch{Batches: []recordbatch.Batch{{BaseOffset: 6, LastOffsetDelta: 1, Attributes: 0x10}}})
	check("a transactional batch waiting: it may be aborted", 6, -1)
}

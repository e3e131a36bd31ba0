package worker

import (
	"errors"
	"testing"

	"kmirror/internal/kafka/batchproduce"
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

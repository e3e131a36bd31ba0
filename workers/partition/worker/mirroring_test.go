package worker

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/recordbatch"
	"kmirror/repo"
	"kmirror/service"
)

// The mirroring session (mirroring_session.go, batch_copy.go) on the fake
// fetcher and producer: record batches as a broker serves them, copied
// whole, acknowledged in order, and checkpointed.

// TestMirroringCopiesRecordsExactly: null and empty keys and values,
// several headers, equal timestamps: each record lands at the next
// destination offset as it was on the source, over many fetch responses;
// the checkpoint, the offset map and the source's end follow the verified
// copies.
func TestMirroringCopiesRecordsExactly(t *testing.T) {
	h := newHarness(t, 1)
	h.src.with(func(s *fakeSource) {
		l := s.partitions[0]
		for i := range int64(25) {
			r := rec(i)
			switch i % 5 {
			case 1:
				r.Key = nil
			case 2:
				r.Value = nil // a tombstone
			case 3:
				r.Key, r.Value = []byte{}, []byte{}
			case 4:
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: "h2"}, kgo.RecordHeader{Key: "h", Value: []byte("again")})
				r.Timestamp = l.recs[i-1].Timestamp
			}
			l.append(r, i%fetchBatchRecords == 0)
		}
	})
	h.addRow(0, nil)
	w := h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	got := h.waitDestination(0, 25)
	want := h.src.records(0)
	for i := range want {
		if got[i].Offset != int64(i) {
			t.Fatalf("destination record %d at offset %d", i, got[i].Offset)
		}
		if (got[i].Key == nil) != (want[i].Key == nil) || (got[i].Value == nil) != (want[i].Value == nil) {
			t.Fatalf("record %d: key nil %v value nil %v; want %v %v", i,
				got[i].Key == nil, got[i].Value == nil, want[i].Key == nil, want[i].Value == nil)
		}
	}
	h.sameAsSource(0, 0, 0)
	w.w.Stop()
	r := h.db.row(pid(0))
	if *r.SrcNext != 25 || *r.DstNext != 25 || r.SourceEndOffset == nil || *r.SourceEndOffset != 25 {
		t.Fatalf("checkpoint (%d, %d), source end %v; want (25, 25), 25", *r.SrcNext, *r.DstNext, r.SourceEndOffset)
	}
	if runs := h.db.runsOf(pid(0)); !slices.Equal(runs, []repo.OffsetRun{{SrcStart: 0, DstStart: 0, Count: 25}}) {
		t.Fatalf("offset map %v; want one run of 25", runs)
	}
	if h.copy.batches != 9 {
		t.Fatalf("%d batches produced; want the 9 fetched, each whole", h.copy.batches)
	}
}

// TestProduceFailures: what a failed copy does. A destination topic
// recreated under the producer, or a producer sequence the destination
// lost, re-aligns in place (the first writes the topic's copies off); any
// other produce error fails the partition retryably, and its retry copies
// on; a partition the producer's metadata does not know yet refreshes it.
func TestProduceFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		realign string // the in-place realignment's cause ("": none)
		failed  string // the FAILED error ("": none)
	}{
		{name: "topic recreated", err: kerr.UnknownTopicID,
			realign: "the destination topic was deleted or recreated under the producer"},
		{name: "sequence lost", err: kerr.OutOfOrderSequenceNumber,
			realign: "the destination no longer knows the producer's sequence"},
		{name: "broker down", err: errors.New("broker down"),
			failed: "produce to destination offset 0 (source offset 0): broker down"},
		{name: "partition unknown", err: errors.New("invalid record partitioning choice"),
			failed: "invalid record partitioning choice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1)
			h.src.produce(0, 4)
			h.copy.failNext = tc.err
			h.addRow(0, nil)
			h.start(0)
			if tc.failed != "" {
				h.db.waitRow(t, pid(0), "FAILED and retried", func(r repo.Partition) bool {
					return r.State == service.StateMirroring && r.RetryAttempt == 1
				})
				f := h.transitionTo(service.StateFailed)
				if !f.Retryable || f.From != service.StateMirroring {
					t.Fatalf("FAILED from %s, retryable %v; want from MIRRORING, retried", f.From, f.Retryable)
				}
				wantContains(t, "error", f.Error, tc.failed)
			} else {
				h.db.waitRow(t, pid(0), "re-aligned in place", func(repo.Partition) bool {
					_, rs, _ := h.db.log()
					return len(rs) == 1
				})
				_, rs, _ := h.db.log()
				if rs[0].Takeover || rs[0].State != service.StateMirroring || rs[0].SrcNext != 0 || rs[0].DstNext != 0 {
					t.Fatalf("realignment %+v; want in place at (0, 0)", rs[0])
				}
				wantContains(t, "cause", rs[0].Cause, tc.realign)
				if ts, _, _ := h.db.log(); len(ts) != 2 {
					t.Fatalf("transitions %s; want no FAILED", describeTransitions(ts))
				}
			}
			h.waitDestination(0, 4)
			h.sameAsSource(0, 0, 0)
			h.watch.mu.Lock()
			writtenOff := slices.Clone(h.watch.writtenOff)
			h.watch.mu.Unlock()
			if wantOff := errors.Is(tc.err, kerr.UnknownTopicID); wantOff != (len(writtenOff) == 1) {
				t.Fatalf("written off %v", writtenOff)
			}
			h.copy.mu.Lock()
			refreshed := h.copy.refreshed
			h.copy.mu.Unlock()
			if wantRefresh := tc.name == "partition unknown"; wantRefresh != (refreshed == 1) {
				t.Fatalf("producer metadata refreshed %d times", refreshed)
			}
		})
	}
}

// TestForeignWriteDuringMirroring: a record someone else writes to the
// destination while the partition mirrors makes its copies land past the
// offsets expected: the session fails (retryably, to re-align), and the
// alignment that follows finds what it cannot explain and fails for good.
func TestForeignWriteDuringMirroring(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 3)
	h.src.with(func(s *fakeSource) { s.hold = true })
	h.addRow(0, nil)
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.dst.append(hDest, 0, rec(77))
	h.src.with(func(s *fakeSource) { s.hold = false })
	h.waitFailed(0, false, "someone else wrote to the destination")
	f := h.transitionTo(service.StateFailed)
	if !f.Retryable || f.From != service.StateMirroring {
		t.Fatalf("the first FAILED is from %s, retryable %v; want from MIRRORING, retryable", f.From, f.Retryable)
	}
	wantContains(t, "error", f.Error, "foreign write detected on east.t/0: source offset 0 landed at destination offset 1, expected 0")
}

// txnSource writes, from offset 0: two records; producer 5's transaction
// of three records, committed (marker at 5); producer 6's of two,
// aborted (marker at 8); two records (9, 10). A read_committed consumer
// reads 0-4, 9 and 10.
func (h *harness) txnSource() {
	h.src.produce(0, 2)
	h.src.produceTxn(0, 5, 3, txnCommit)
	h.src.produceTxn(0, 6, 2, txnAbort)
	h.src.produce(0, 2)
}

// TestTransactionsCopyCommittedRecordsOnly: markers and aborted
// transactions' records are never produced, and the checkpoint passes
// them once the copies before them are answered; records of a
// transaction still open wait for its commit (the last stable offset).
func TestTransactionsCopyCommittedRecordsOnly(t *testing.T) {
	h := newHarness(t, 1)
	h.txnSource()
	h.src.produceTxn(0, 7, 2, 0) // open at 11, 12
	h.addRow(0, nil)
	w := h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.waitDestination(0, 7)
	h.copiesInOrder(0, 0, 0)
	h.src.endTxn(0, 7, txnCommit) // at 13
	h.waitDestination(0, 9)
	h.copiesInOrder(0, 0, 0)
	w.w.Stop()
	r := h.db.row(pid(0))
	if *r.SrcNext != 14 || *r.DstNext != 9 {
		t.Fatalf("checkpoint (%d, %d); want (14, 9): past the last marker", *r.SrcNext, *r.DstNext)
	}
	want := []repo.OffsetRun{{SrcStart: 0, DstStart: 0, Count: 5}, {SrcStart: 9, DstStart: 5, Count: 4}}
	if runs := h.db.runsOf(pid(0)); !slices.Equal(runs, want) {
		t.Fatalf("offset map %v; want %v", runs, want)
	}
}

// TestAlignAcrossTransactionMarkers: alignment walks the source's
// committed records only: forward over copies past a checkpoint with
// markers and an aborted transaction between them, and back through an
// offset map with a gap.
func TestAlignAcrossTransactionMarkers(t *testing.T) {
	t.Run("forward", func(t *testing.T) {
		h := newHarness(t, 1)
		h.txnSource()
		h.dst.createTopic(hDest, 1)
		for _, r := range h.src.records(0) {
			h.dst.append(hDest, 0, r)
		}
		h.checkpointed(0, service.StateStopped, 6, 5, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 5})
		h.start(0)
		h.db.waitState(t, pid(0), service.StateMirroring)
		if s, d := checkpointOf(h.transitionTo(service.StateMirroring)); s != 11 || d != 7 {
			t.Fatalf("MIRRORING at (%d, %d); want (11, 7)", s, d)
		}
		want := []repo.OffsetRun{{SrcStart: 0, DstStart: 0, Count: 5}, {SrcStart: 9, DstStart: 5, Count: 2}}
		if runs := h.db.runsOf(pid(0)); !slices.Equal(runs, want) {
			t.Fatalf("offset map %v; want %v", runs, want)
		}
	})
	t.Run("rewind", func(t *testing.T) {
		h := newHarness(t, 1)
		h.txnSource()
		h.dst.createTopic(hDest, 1)
		for _, r := range h.src.records(0)[:6] { // the copy of 10 was lost
			h.dst.append(hDest, 0, r)
		}
		h.checkpointed(0, service.StateStopped, 11, 7,
			repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 5}, repo.OffsetRun{SrcStart: 9, DstStart: 5, Count: 2})
		h.start(0)
		h.db.waitState(t, pid(0), service.StateMirroring)
		if s, d := checkpointOf(h.transitionTo(service.StateMirroring)); s != 10 || d != 6 {
			t.Fatalf("MIRRORING at (%d, %d); want (10, 6)", s, d)
		}
		h.waitDestination(0, 7)
		h.copiesInOrder(0, 0, 0)
	})
}

// TestTroubleIsReportedWhileMirroring: a lasting fetch error is put in the
// MIRRORING row when the clients' health changes, and cleared when it
// ends; the producer's is the partition's only while copies are in
// flight.
func TestTroubleIsReportedWhileMirroring(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 2)
	h.addRow(0, nil)
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.waitDestination(0, 2)
	hasError := func(want string) func(repo.Partition) bool {
		return func(r repo.Partition) bool {
			return r.State == service.StateMirroring && strings.Contains(r.Error, want) && (want != "" || r.Error == "")
		}
	}

	h.src.with(func(s *fakeSource) { s.fetchTrouble = errors.New("broker 1 unreachable") })
	h.copy.healthChanged()
	h.db.waitRow(t, pid(0), "fetch trouble reported", hasError("fetching from the source has failed since"))
	r := h.db.row(pid(0))
	wantContains(t, "error", r.Error, "(retrying): broker 1 unreachable")

	// The fetches recover; the producer has trouble, but nothing is in flight.
	h.src.with(func(s *fakeSource) { s.fetchTrouble = nil })
	h.copy.mu.Lock()
	h.copy.trouble = errors.New("destination broker 2 unreachable")
	h.copy.mu.Unlock()
	h.copy.healthChanged()
	h.db.waitRow(t, pid(0), "trouble cleared", hasError(""))

	// With copies in flight, the producer's trouble is the partition's.
	h.copy.mu.Lock()
	h.copy.hold = true
	h.copy.mu.Unlock()
	h.src.produce(0, 1)
	h.waitDestination(0, 3)
	h.copy.healthChanged()
	h.db.waitRow(t, pid(0), "produce trouble reported", hasError("producing to the destination has failed since"))
	h.copy.release()
}

// TestThrottledTimeIsCounted: the time the mirror's throttle held a
// partition's copies is added to what its row had, and saved with its
// checkpoint.
func TestThrottledTimeIsCounted(t *testing.T) {
	h := newHarness(t, 1)
	h.copy.throttled = 1500 * time.Millisecond
	h.src.produce(0, 3) // one stored batch: one delivery
	h.addRow(0, func(r *repo.Partition) { r.ThrottledMs = 100 })
	w := h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.waitDestination(0, 3)
	w.w.Stop()
	if r := h.db.row(pid(0)); r.ThrottledMs != 1600 {
		t.Fatalf("throttled %d ms; want 1600 (100 before, 1500 now)", r.ThrottledMs)
	}
}

// TestRecompression: a mirror with its own compression.type stores every
// batch with that codec: each is re-encoded, and its records land as the
// source's.
func TestRecompression(t *testing.T) {
	h := newHarness(t, 1)
	gzip := recordbatch.Gzip
	h.copy.recompress = &gzip
	h.src.produce(0, 7)
	h.addRow(0, nil)
	w := h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.waitDestination(0, 7)
	h.sameAsSource(0, 0, 0)
	w.w.Stop()
	if h.copy.codecs[recordbatch.Gzip] != 3 || len(h.copy.codecs) != 1 {
		t.Fatalf("batches by codec %v; want the 3 batches gzip", h.copy.codecs)
	}
	if runs := h.db.runsOf(pid(0)); !slices.Equal(runs, []repo.OffsetRun{{SrcStart: 0, DstStart: 0, Count: 7}}) {
		t.Fatalf("offset map %v; want one run of 7", runs)
	}
}

package worker

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/repo"
	"kmirror/service"
)

// Alignment (align.go): every outcome of PREPARING's search for where
// mirroring resumes, each proven on fake clusters.

// checkpointed sets partition p's row: state, checkpoint (s, d), the source
// topic id recorded, and the offset map runs.
func (h *harness) checkpointed(p int32, state service.PartitionState, s, d int64, runs ...repo.OffsetRun) {
	h.addRow(p, func(r *repo.Partition) {
		r.State, r.SrcNext, r.DstNext = state, ptr(s), ptr(d)
	})
	h.db.setRuns(pid(p), runs...)
	h.db.mu.Lock()
	h.db.topics[[2]string{hMirror, hTopic}].sourceID = srcID
	h.db.mu.Unlock()
}

// waitFailed waits for FAILED and checks whether it is retried and why.
func (h *harness) waitFailed(p int32, retryable bool, why string) repo.Partition {
	h.t.Helper()
	r := h.db.waitRow(h.t, pid(p), fmt.Sprintf("FAILED, retryable %v", retryable), func(r repo.Partition) bool {
		return r.State == service.StateFailed && r.Retryable == retryable
	})
	wantContains(h.t, "the row's error", r.Error, why)
	return r
}

// TestFirstStartRefusesANonEmptyDestination: a destination partition that
// already holds records this mirror did not write fails a new partition
// for good, before anything is copied.
func TestFirstStartRefusesANonEmptyDestination(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 5)
	h.dst.createTopic(hDest, 1)
	h.dst.append(hDest, 0, rec(100), rec(101), rec(102), rec(103))
	h.addRow(0, nil)
	h.start(0)
	r := h.waitFailed(0, false, "already holds records [0, 4) that this mirror did not write")
	if r.NextRetryAt != nil {
		t.Fatalf("a permanent failure is retried at %v", r.NextRetryAt)
	}
	if h.copy.batches != 0 || len(h.dst.records(hDest, 0)) != 4 {
		t.Fatalf("produced %d batches to a refused destination", h.copy.batches)
	}
	if r.SrcNext != nil {
		t.Fatalf("a refused partition has a checkpoint %d", *r.SrcNext)
	}
}

// TestRestartAlignsForwardOverVerifiedRecords: a destination that holds
// records past the checkpoint (the last owner copied them and crashed
// before its checkpoint) is verified record by record against the source,
// the offset map extended over them, and mirroring resumes after them
// rather than copying them twice.
func TestRestartAlignsForwardOverVerifiedRecords(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 10)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 8)
	h.checkpointed(0, service.StateStopped, 5, 5, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 5})
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	tr := h.transitionTo(service.StateMirroring)
	if s, d := checkpointOf(tr); s != 8 || d != 8 {
		t.Fatalf("MIRRORING at (%d, %d); want (8, 8), after the 3 verified records", s, d)
	}
	wantContains(t, "reason", tr.Reason, "verified 3 record(s) written past the checkpoint")
	runs := h.db.runsOf(pid(0))
	if len(runs) != 2 || runs[1] != (repo.OffsetRun{SrcStart: 5, DstStart: 5, Count: 3}) {
		t.Fatalf("offset map %v; want the verified run 5→5 of 3 saved", runs)
	}
	h.waitDestination(0, 10)
	h.sameAsSource(0, 0, 0)
}

// TestRestartRefusesWhatItCannotVerify: a destination past the checkpoint
// that is not the source's next records, a source that cannot show them,
// and a source truncated behind the checkpoint each fail the partition for
// good, with nothing copied.
func TestRestartRefusesWhatItCannotVerify(t *testing.T) {
	for _, tc := range []struct {
		name string
		// srcEnd is the source's end (its records from 0), dst what the
		// destination holds; the checkpoint is (5, 5).
		srcEnd   int
		dst      func(h *harness)
		srcStart int64
		why      string
	}{
		{"a record differs", 10, func(h *harness) {
			h.mirrored(0, 0, 6)
			other := rec(6)
			other.Value = []byte("someone else's")
			h.dst.append(hDest, 0, other)
			h.mirrored(0, 7, 8)
		}, 0, "divergence on t/0: destination offset 6 does not match source offset 6 (values differ)"},
		{"a header differs", 10, func(h *harness) {
			h.mirrored(0, 0, 5)
			other := rec(5)
			other.Headers[0].Value = []byte("x")
			h.dst.append(hDest, 0, other)
		}, 0, "destination offset 5 does not match source offset 5 (header 0 differs)"},
		{"the destination holds more than the source", 7, func(h *harness) {
			h.mirrored(0, 0, 7)
			h.dst.append(hDest, 0, rec(7), rec(8))
		}, 0, "the destination holds 4 record(s) past checkpoint offset 5, but the source has only 2"},
		{"retention removed the records to verify", 10, func(h *harness) {
			h.mirrored(0, 0, 8)
		}, 6, "the source records after offset 5 were removed by retention, so they cannot be verified"},
		{"the source was truncated", 4, func(h *harness) {
			h.mirrored(0, 0, 4)
			h.dst.append(hDest, 0, rec(4))
		}, 0, "ends at offset 4, before the checkpoint 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1)
			h.src.produce(0, tc.srcEnd)
			h.dst.createTopic(hDest, 1)
			tc.dst(h)
			h.src.with(func(s *fakeSource) { s.partitions[0].removeBefore(tc.srcStart) })
			h.checkpointed(0, service.StateStopped, 5, 5, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 5})
			before := len(h.dst.records(hDest, 0))
			h.start(0)
			h.waitFailed(0, false, tc.why)
			if h.copy.batches != 0 || len(h.dst.records(hDest, 0)) != before {
				t.Fatal("records were copied to a destination that failed alignment")
			}
		})
	}
}

// TestRestartRewindsAfterDestinationLoss: a destination that ends before
// the checkpoint lost records: the offset map says which source record its
// last one is, that record is compared, the map is cut back, and mirroring
// copies the lost records again.
func TestRestartRewindsAfterDestinationLoss(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 10)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 5) // the destination lost 5..7
	h.checkpointed(0, service.StateStopped, 8, 8, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 8})
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	tr := h.transitionTo(service.StateMirroring)
	if s, d := checkpointOf(tr); s != 5 || d != 5 {
		t.Fatalf("MIRRORING at (%d, %d); want (5, 5)", s, d)
	}
	wantContains(t, "reason", tr.Reason, "destination lost its records after offset 4; re-mirroring from offset 5 (the checkpoint was 8)")
	if runs := h.db.runsOf(pid(0)); len(runs) != 1 || runs[0].Count != 5 {
		t.Fatalf("offset map %v; want cut back to 0→0 of 5", runs)
	}
	h.waitDestination(0, 10)
	h.sameAsSource(0, 0, 0)
}

// TestRestartRewindRefusesAnUnmappedEnd: a destination that ends before
// the checkpoint at an offset the offset map does not hold cannot be
// rewound safely.
func TestRestartRewindRefusesAnUnmappedEnd(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 10)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 5)
	h.checkpointed(0, service.StateStopped, 8, 8, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 3})
	h.start(0)
	h.waitFailed(0, false, "ends at 5, before the checkpoint 8, and offset 4 is not in the offset map")
}

// TestRestartRewindComparesTheLastRecord: the destination's last record
// after a loss must be the source record the offset map names.
func TestRestartRewindComparesTheLastRecord(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 10)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 4)
	h.dst.append(hDest, 0, rec(44))
	h.checkpointed(0, service.StateStopped, 8, 8, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 8})
	h.start(0)
	h.waitFailed(0, false, "destination offset 4 does not match source offset 4")
}

// TestRestartAfterDestinationLostEverything: a destination that holds
// nothing any more (recreated empty, or emptied by its retention) is
// mirrored again from where mirroring first began (the offset map's first
// run), and the map is emptied.
func TestRestartAfterDestinationLostEverything(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dstStart int64 // the destination's start = end
		want     [2]int64
	}{
		{"recreated empty", 0, [2]int64{2, 0}},
		{"emptied by retention", 6, [2]int64{2, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1)
			h.src.produce(0, 10)
			h.dst.createTopic(hDest, 1)
			h.dst.with(hDest, 0, func(l *fakeLog) { l.start = tc.dstStart })
			h.checkpointed(0, service.StateStopped, 10, 8, repo.OffsetRun{SrcStart: 2, DstStart: 0, Count: 8})
			h.start(0)
			h.db.waitState(t, pid(0), service.StateMirroring)
			tr := h.transitionTo(service.StateMirroring)
			if s, d := checkpointOf(tr); s != tc.want[0] || d != tc.want[1] {
				t.Fatalf("MIRRORING at (%d, %d); want %v", s, d, tc.want)
			}
			wantContains(t, "reason", tr.Reason, "destination lost its records; re-mirroring from offset 2")
			if runs := h.db.runsOf(pid(0)); len(runs) != 0 {
				t.Fatalf("offset map %v; want empty", runs)
			}
			h.waitDestination(0, 8)
			h.sameAsSource(0, tc.dstStart, 2)
		})
	}
}

// TestRetentionRemovedRecordsBeforeTheyWereMirrored: a source whose
// retention removed records past the checkpoint before they were copied:
// mirroring resumes at the source's start, and the gap is counted as lost
// on the row.
func TestRetentionRemovedRecordsBeforeTheyWereMirrored(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 10)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 3)
	h.src.with(func(s *fakeSource) { s.partitions[0].removeBefore(6) })
	h.checkpointed(0, service.StateStopped, 3, 3, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 3})
	h.start(0)
	r := h.db.waitState(t, pid(0), service.StateMirroring)
	tr := h.transitionTo(service.StateMirroring)
	if s, d := checkpointOf(tr); s != 6 || d != 3 || tr.LostRecordsAdd != 3 || r.LostRecords != 3 {
		t.Fatalf("MIRRORING at (%d, %d) with %d lost (row %d); want (6, 3) with 3", s, d, tr.LostRecordsAdd, r.LostRecords)
	}
	wantContains(t, "reason", tr.Reason, "3 source offset(s) [3, 6) were removed by retention before they were mirrored")
	h.waitDestination(0, 7)
	h.sameAsSource(0, 3, 6)
}

// TestRestartAtTheCheckpointChecksTheLastMirroredRecord: a destination
// that ends exactly at the checkpoint, on a topic with no source id
// recorded, resumes after comparing the last mirrored record on both
// sides, and records the id only then; a source that no longer holds the
// record at that offset (recreated with as many records) fails for good.
func TestRestartAtTheCheckpointChecksTheLastMirroredRecord(t *testing.T) {
	for _, rewritten := range []bool{false, true} {
		t.Run(fmt.Sprintf("rewritten=%v", rewritten), func(t *testing.T) {
			h := newHarness(t, 1)
			h.src.produce(0, 8)
			h.dst.createTopic(hDest, 1)
			h.mirrored(0, 0, 5)
			if rewritten {
				h.src.with(func(s *fakeSource) {
					s.partitions[0].recs[4] = &kgo.Record{Offset: 4, Key: []byte("new"), Value: []byte("topic")}
				})
			}
			h.checkpointed(0, service.StateStopped, 5, 5, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 5})
			h.db.mu.Lock()
			h.db.topics[[2]string{hMirror, hTopic}].sourceID = nil
			h.db.mu.Unlock()
			h.start(0)
			if rewritten {
				h.waitFailed(0, false, "source t/0 offset 4 no longer holds the record mirrored to destination offset 4")
				if id := h.db.topic(hMirror, hTopic).sourceID; id != nil {
					t.Fatalf("source topic id %x recorded by an alignment that failed", id)
				}
				return
			}
			h.db.waitState(t, pid(0), service.StateMirroring)
			tr := h.transitionTo(service.StateMirroring)
			wantContains(t, "reason", tr.Reason, "resuming at source offset 5")
			if h.src.reads == 0 || h.dst.reads == 0 {
				t.Fatal("the last mirrored record was not compared")
			}
			if id := h.db.topic(hMirror, hTopic).sourceID; !bytes.Equal(id, srcID) {
				t.Fatalf("source topic id %x after the alignment; want %x recorded", id, srcID)
			}
			h.waitDestination(0, 8)
			h.sameAsSource(0, 0, 0)
		})
	}
}

// TestRestartAtTheCheckpointTrustsTheRecordedTopicID: with the source
// topic's id recorded and matching, a destination that ends exactly at the
// checkpoint proves it: mirroring resumes without reading a record back.
func TestRestartAtTheCheckpointTrustsTheRecordedTopicID(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 8)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 5)
	h.checkpointed(0, service.StateStopped, 5, 5, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 5})
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	tr := h.transitionTo(service.StateMirroring)
	wantContains(t, "reason", tr.Reason, "the destination ends at the checkpoint")
	if h.src.reads != 0 || h.dst.reads != 0 {
		t.Fatalf("%d source and %d destination reads; want none", h.src.reads, h.dst.reads)
	}
	h.waitDestination(0, 8)
	h.sameAsSource(0, 0, 0)
}

// TestTakeoverReAlignsKeepingTheState: a new owner of a partition that its
// previous owner left MIRRORING, PAUSING or STOPPING (not handed back)
// re-aligns as part of taking the lease, recording a takeover realignment
// with the state kept, before it acts on the state.
func TestTakeoverReAlignsKeepingTheState(t *testing.T) {
	for _, tc := range []struct {
		state  service.PartitionState
		desire service.DesiredState
		next   service.PartitionState
	}{
		{service.StateMirroring, service.DesiredMirroring, service.StateMirroring},
		{service.StatePausing, service.DesiredPaused, service.StatePaused},
		{service.StateStopping, service.DesiredStopped, service.StateStopped},
	} {
		t.Run(tc.state.String(), func(t *testing.T) {
			h := newHarness(t, 1)
			h.src.produce(0, 10)
			h.dst.createTopic(hDest, 1)
			h.mirrored(0, 0, 8) // the crashed owner copied 5..7 past its checkpoint
			h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = tc.desire })
			h.checkpointed(0, tc.state, 5, 5, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 5})
			h.run(0, hOwner, hEpoch, "crashed")
			h.db.waitRow(t, pid(0), "re-aligned", func(r repo.Partition) bool { return r.AlignedEpoch == hEpoch })
			_, rs, _ := h.db.log()
			if len(rs) != 1 || !rs[0].Takeover || rs[0].Previous != "crashed" || rs[0].State != tc.state ||
				rs[0].SrcNext != 8 || rs[0].DstNext != 8 {
				t.Fatalf("realignments %+v; want a takeover from crashed keeping %s at (8, 8)", rs, tc.state)
			}
			r := h.db.waitState(t, pid(0), tc.next)
			if ts, _, _ := h.db.log(); len(ts) > 0 && ts[0].From != tc.state {
				t.Fatalf("the first state change is from %s; want from %s, after the realignment", ts[0].From, tc.state)
			}
			if tc.next == service.StateMirroring {
				h.waitDestination(0, 10)
				h.sameAsSource(0, 0, 0)
			} else if *r.SrcNext != 8 {
				t.Fatalf("%s with checkpoint %d; want 8", r.State, *r.SrcNext)
			}
		})
	}
}

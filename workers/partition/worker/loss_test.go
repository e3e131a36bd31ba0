package worker

import (
	"testing"

	"kmirror/repo"
	"kmirror/service"
)

// Losses while mirroring: the destination watch ends a session from
// outside (heal in worker.go), and a source whose retention overtakes the
// session (out of range). Both re-align in place: the partition stays
// MIRRORING, the realignment is recorded with its cause, and copying goes
// on from where alignment says.

// TestLossDuringMirroringReAlignsInPlace: the destination lost records the
// session had copied. The session's progress is saved, the loss put in
// the row (with the destination's end the watch found, or the
// interruption's message when the watch holds none), the partition
// re-aligned in place behind the loss, and the lost records copied again.
// An interruption without a loss (copies written off) re-aligns without
// noting anything.
func TestLossDuringMirroringReAlignsInPlace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		loss      *Loss
		i         Interruption
		lostAfter int64 // the destination's end after the loss
		noted     notedError
	}{
		{name: "loss found by the watch", loss: &Loss{Msg: "the destination lost records [3, 10)", DestinationEnd: 3},
			i: Interruption{Msg: "the destination lost records", Cause: "destination loss", Lost: true}, lostAfter: 3,
			noted: notedError{state: service.StateMirroring, msg: "the destination lost records [3, 10)", end: 3}},
		{name: "loss in the interruption only",
			i: Interruption{Msg: "the destination lost records", Cause: "destination loss", Lost: true}, lostAfter: 3,
			noted: notedError{state: service.StateMirroring, msg: "the destination lost records", end: -1}},
		{name: "copies written off", i: Interruption{Msg: "copies written off"}, lostAfter: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1)
			h.src.produce(0, 10)
			h.addRow(0, nil)
			h.start(0)
			h.db.waitState(t, pid(0), service.StateMirroring)
			h.waitDestination(0, 10)

			h.dst.with(hDest, 0, func(l *fakeLog) { l.truncate(tc.lostAfter) })
			if tc.loss != nil {
				h.watch.setLoss(keyOf(0), *tc.loss)
			}
			h.watch.interrupt(t, keyOf(0), tc.i)
			h.db.waitRow(t, pid(0), "re-aligned in place", func(r repo.Partition) bool {
				_, rs, _ := h.db.log()
				return len(rs) == 1
			})
			_, rs, noted := h.db.log()
			a := rs[0]
			if a.Takeover || a.State != service.StateMirroring || a.Cause != cmpStr(tc.i.Cause, tc.i.Msg) ||
				a.SrcNext != tc.lostAfter || a.DstNext != tc.lostAfter {
				t.Fatalf("realignment %+v; want in place while MIRRORING, cause %q, at (%d, %d)",
					a, cmpStr(tc.i.Cause, tc.i.Msg), tc.lostAfter, tc.lostAfter)
			}
			switch {
			case tc.noted.msg == "" && len(noted) != 0:
				t.Fatalf("noted %+v; want nothing", noted)
			case tc.noted.msg != "" && (len(noted) != 1 || noted[0] != tc.noted):
				t.Fatalf("noted %+v; want %+v", noted, tc.noted)
			}
			if ts, _, _ := h.db.log(); len(ts) != 2 {
				t.Fatalf("transitions %s; want none after MIRRORING", describeTransitions(ts))
			}
			h.src.produce(0, 2)
			h.waitDestination(0, 12)
			h.sameAsSource(0, 0, 0)
			if r := h.db.row(pid(0)); r.Error != "" || r.State != service.StateMirroring {
				t.Fatalf("row %s with error %q after the realignment; want MIRRORING, none", r.State, r.Error)
			}
		})
	}
}

// TestLossFoundBeforeAlignmentIsNoted: a loss the watch holds when a
// partition prepares is put in its row (PREPARING) before alignment
// repairs it.
func TestLossFoundBeforeAlignmentIsNoted(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 10)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 4)
	h.checkpointed(0, service.StateStopped, 8, 8, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 8})
	h.watch.setLoss(keyOf(0), Loss{Msg: "lost [4, 8)", DestinationEnd: 4})
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	if _, _, noted := h.db.log(); len(noted) != 1 || noted[0] != (notedError{state: service.StatePreparing, msg: "lost [4, 8)", end: 4}) {
		t.Fatalf("noted %+v; want the loss while PREPARING", noted)
	}
	if s, d := checkpointOf(h.transitionTo(service.StateMirroring)); s != 4 || d != 4 {
		t.Fatalf("MIRRORING at (%d, %d); want (4, 4)", s, d)
	}
	h.waitDestination(0, 10)
	h.sameAsSource(0, 0, 0)
}

// TestRetentionOvertakesTheSession: the source removed the records the
// session was about to fetch (OFFSET_OUT_OF_RANGE): the partition
// re-aligns in place, counts the removed records as lost, and mirrors on
// from the source's new start.
func TestRetentionOvertakesTheSession(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 5)
	h.src.with(func(s *fakeSource) { s.hold = true })
	h.addRow(0, nil)
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.src.produce(0, 5)
	h.src.with(func(s *fakeSource) {
		s.partitions[0].removeBefore(7)
		s.hold = false
	})
	r := h.db.waitRow(t, pid(0), "re-aligned in place", func(r repo.Partition) bool { return r.LostRecords == 7 })
	_, rs, _ := h.db.log()
	if len(rs) != 1 || rs[0].Takeover || rs[0].LostRecordsAdd != 7 || rs[0].SrcNext != 7 || rs[0].DstNext != 0 {
		t.Fatalf("realignments %+v; want one in place at (7, 0) with 7 lost", rs)
	}
	wantContains(t, "cause", rs[0].Cause, "source offset 0 is no longer on the source")
	if r.State != service.StateMirroring {
		t.Fatalf("row %s; want MIRRORING", r.State)
	}
	h.waitDestination(0, 3)
	h.sameAsSource(0, 0, 7)
}

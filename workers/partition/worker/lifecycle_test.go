package worker

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kmirror/repo"
	"kmirror/service"
)

// TestNewPartitionMirrorsFromSourceStart: a partition seen for the first
// time goes UNKNOWN → PREPARING → MIRRORING with its checkpoint at the
// source's log start (records retention removed before the topic was added
// are not counted as lost) and the destination's empty start; the
// destination topic is created, the source topic's id recorded, the
// read-only ACL set and recorded as enforced; then the session copies the
// source's records to the destination exactly, the later ones too.
func TestNewPartitionMirrorsFromSourceStart(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 10)
	h.src.with(func(s *fakeSource) { s.partitions[0].removeBefore(3) })
	h.addRow(0, nil)
	h.start(0)

	h.db.waitState(t, pid(0), service.StateMirroring)
	ts, _, _ := h.db.log()
	if len(ts) != 2 || ts[0].From != service.StateUnknown || ts[0].To != service.StatePreparing ||
		ts[1].To != service.StateMirroring {
		t.Fatalf("transitions %s; want UNKNOWN → PREPARING → MIRRORING", describeTransitions(ts))
	}
	if s, d := checkpointOf(ts[1]); s != 3 || d != 0 {
		t.Fatalf("MIRRORING at checkpoint (%d, %d); want (3, 0): the source's start, the destination's", s, d)
	}
	if ts[1].LostRecordsAdd != 0 {
		t.Fatalf("a new partition counts %d lost records; want 0", ts[1].LostRecordsAdd)
	}
	wantContains(t, "reason", ts[1].Reason, "new: mirroring from source offset 3")
	if h.dst.created[0] != hDest {
		t.Fatalf("created destination topics %v; want %s", h.dst.created, hDest)
	}
	top := h.db.topic(hMirror, hTopic)
	if string(top.sourceID) != string(srcID) {
		t.Fatalf("recorded source topic id %x; want %x", top.sourceID, srcID)
	}
	if !h.dst.acl[hDest] || top.readOnly == nil || !*top.readOnly {
		t.Fatalf("read-only ACL %v, recorded %v; want set and enforced", h.dst.acl[hDest], top.readOnly)
	}

	// The session copies records 3..9 to destination offsets 0..6.
	h.waitDestination(0, 7)
	h.sameAsSource(0, 0, 3)
	// And what the source gets next.
	h.src.produce(0, 5)
	h.waitDestination(0, 12)
	h.sameAsSource(0, 0, 3)
}

// TestPauseAndResume: a MIRRORING partition whose topic is paused goes
// PAUSING → PAUSED, with its session's verified progress saved as the
// checkpoint and in the offset map; resumed, it goes PAUSED → MIRRORING
// from that checkpoint without aligning, and copies on.
func TestPauseAndResume(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 6)
	h.addRow(0, nil)
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.waitDestination(0, 6)

	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredPaused })
	r := h.db.waitState(t, pid(0), service.StatePaused)
	if r.PreviousState != service.StatePausing {
		t.Fatalf("PAUSED from %s; want PAUSING", r.PreviousState)
	}
	if r.SrcNext == nil || *r.SrcNext != 6 || *r.DstNext != 6 {
		t.Fatalf("checkpoint at pause %v/%v; want 6/6", r.SrcNext, r.DstNext)
	}
	if runs := h.db.runsOf(pid(0)); len(runs) != 1 || runs[0] != (repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 6}) {
		t.Fatalf("offset map %v; want one run 0→0 of 6", runs)
	}
	if r.LastMirroredSrc == nil || *r.LastMirroredSrc != 5 {
		t.Fatalf("last mirrored source offset %v; want 5", r.LastMirroredSrc)
	}
	// Nothing is copied while paused.
	h.src.produce(0, 4)
	reads := h.src.reads

	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredMirroring })
	h.db.waitState(t, pid(0), service.StateMirroring)
	last := h.lastTransition()
	if last.From != service.StatePaused || last.SrcNext != nil {
		t.Fatalf("resume wrote %s → %s with checkpoint %v; want PAUSED → MIRRORING keeping it", last.From, last.To, last.SrcNext)
	}
	wantContains(t, "reason", last.Reason, "resumed from the checkpoint")
	h.waitDestination(0, 10)
	h.sameAsSource(0, 0, 0)
	if h.src.reads != reads {
		t.Fatal("resume read source records back: it must not align")
	}
	if f := h.src.fetches; f[len(f)-1] != 6 {
		t.Fatalf("the resumed session fetched from %d; want 6", f[len(f)-1])
	}
}

// TestStopLiftsReadOnlyOnlyWhenLast: a topic removed (failover) takes a
// MIRRORING partition through STOPPING to STOPPED. The read-only ACL is
// lifted only by the last of the topic's partitions to stop: while
// partition 1 still mirrors, partition 0 stops and leaves it on; once
// partition 1 is STOPPED too, the next partition to stop lifts it and
// records it as no longer enforced.
func TestStopLiftsReadOnlyOnlyWhenLast(t *testing.T) {
	h := newHarness(t, 2)
	h.src.produce(0, 3)
	h.src.produce(1, 3)
	h.addRow(0, nil)
	h.addRow(1, func(r *repo.Partition) { r.State = service.StateMirroring; r.LeaseOwner = "other" })
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.waitDestination(0, 3)

	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredStopped })
	h.db.waitState(t, pid(0), service.StateStopped)
	stopping := h.transitionTo(service.StateStopping)
	if stopping.From != service.StateMirroring {
		t.Fatalf("STOPPING from %s; want MIRRORING", stopping.From)
	}
	wantContains(t, "reason", stopping.Reason, "topic removed")
	if !h.dst.acl[hDest] {
		t.Fatal("the ACL was lifted while partition 1 still mirrors")
	}
	if r := h.db.row(pid(0)); r.SrcNext == nil || *r.SrcNext != 3 {
		t.Fatalf("stopped with checkpoint %v; want 3", r.SrcNext)
	}

	// Partition 1 stops elsewhere; partition 0 is added and removed again.
	h.db.update(pid(1), func(r *repo.Partition) { r.State = service.StateStopped })
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredMirroring })
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredStopped })
	h.db.waitRow(t, pid(0), "STOPPED again", func(r repo.Partition) bool {
		return r.State == service.StateStopped && r.PreviousState == service.StateStopping && h.topicReadOnly() == "false"
	})
	if h.dst.acl[hDest] {
		t.Fatal("the last partition to stop left the read-only ACL on")
	}
}

func (h *harness) topicReadOnly() string {
	top := h.db.topic(hMirror, hTopic)
	if top.readOnly == nil {
		return "unset"
	}
	if *top.readOnly {
		return "true"
	}
	return "false"
}

// TestStopHandsBackCleanlyAndTheNextOwnerTrustsIt: a worker stopped while
// MIRRORING (a hand-back) saves a checkpoint marked handed back at its
// destination offset; the next owner, taking the MIRRORING partition over,
// re-aligns keeping the state (a takeover realignment naming the previous
// owner) without reading a record back, and copies on from there.
func TestStopHandsBackCleanlyAndTheNextOwnerTrustsIt(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 5)
	h.addRow(0, nil)
	first := h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.waitDestination(0, 5)
	first.w.Stop()
	r := h.db.row(pid(0))
	if r.HandedBackDst != 5 || *r.DstNext != 5 {
		t.Fatalf("handed back at %d with checkpoint %v; want both 5", r.HandedBackDst, *r.DstNext)
	}
	if r.State != service.StateMirroring {
		t.Fatalf("a hand-back changed the state to %s", r.State)
	}

	// The lease moves to "next" at epoch 8.
	h.db.update(pid(0), func(r *repo.Partition) { r.LeaseOwner, r.LeaseEpoch = "next", 8 })
	h.db.mu.Lock()
	h.db.owner = "next"
	h.db.mu.Unlock()
	srcReads, dstReads := h.src.reads, h.dst.reads
	h.src.produce(0, 2)
	h.run(0, "next", 8, hOwner)
	h.db.waitRow(t, pid(0), "re-aligned under epoch 8", func(r repo.Partition) bool { return r.AlignedEpoch == 8 })
	_, rs, _ := h.db.log()
	if len(rs) != 1 || !rs[0].Takeover || rs[0].Previous != hOwner || rs[0].State != service.StateMirroring ||
		rs[0].SrcNext != 5 || rs[0].DstNext != 5 {
		t.Fatalf("realignments %+v; want one takeover from %s keeping MIRRORING at (5, 5)", rs, hOwner)
	}
	wantContains(t, "summary", rs[0].Summary, "handed back cleanly")
	if h.src.reads != srcReads || h.dst.reads != dstReads {
		t.Fatal("a clean hand-back's takeover read records back")
	}
	h.waitDestination(0, 7)
	h.sameAsSource(0, 0, 0)
	ts, _, _ := h.db.log()
	for _, tr := range ts {
		if tr.Epoch == 8 {
			t.Fatalf("the takeover wrote a state change %s → %s", tr.From, tr.To)
		}
	}
}

// TestLeaseLostEndsTheWorker: a state change the fence refuses (another
// owner holds the row) ends the worker without writing FAILED.
func TestLeaseLostEndsTheWorker(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 2)
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredPaused })
	h.addRow(0, func(r *repo.Partition) {
		r.State = service.StatePaused
		r.SrcNext, r.DstNext = ptr(int64(0)), ptr(int64(0))
	})
	w := h.start(0)
	h.cfg.BeforeStep.WaitOrTimeout(t) // PAUSED, idle
	h.db.update(pid(0), func(r *repo.Partition) { r.LeaseOwner, r.LeaseEpoch = "thief", 9 })
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredMirroring })
	w.waitExited(t)
	if ts, _, _ := h.db.log(); len(ts) != 0 {
		t.Fatalf("a worker without its lease wrote %s", describeTransitions(ts))
	}
	if r := h.db.row(pid(0)); r.State != service.StatePaused || r.LeaseOwner != "thief" {
		t.Fatalf("row %s owned by %s; want PAUSED, thief's", r.State, r.LeaseOwner)
	}
}

// TestExpiredLeaseStopsMirroring: a lease whose deadline passed is not
// trusted: the session stops copying and the worker ends.
func TestExpiredLeaseStopsMirroring(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 3)
	h.addRow(0, nil)
	w := h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.waitDestination(0, 3)
	w.expired.Store(true)
	w.cancel() // the lease's context ends with it
	w.waitExited(t)
	h.src.produce(0, 3)
	if n := len(h.dst.records(hDest, 0)); n != 3 {
		t.Fatalf("destination holds %d records after the lease expired; want 3", n)
	}
	if r := h.db.row(pid(0)); r.State != service.StateMirroring {
		t.Fatalf("an expired lease's worker left the row %s", r.State)
	}
}

// TestStopDuringAlignment: a worker stopped while its alignment waits on
// the destination ends at once, writing nothing: no FAILED for a stop.
func TestStopDuringAlignment(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 3)
	h.dst.createTopic(hDest, 1)
	h.dst.stall, h.dst.stalled = true, make(chan struct{})
	h.checkpointed(0, service.StateStopped, 0, 0)
	w := h.start(0)
	select {
	case <-h.dst.stalled:
	case <-time.After(waitFor):
		t.Fatal("alignment never asked the destination's offsets")
	}
	stopped := make(chan struct{})
	go func() { w.w.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(waitFor):
		t.Fatal("Stop waited on the alignment")
	}
	ts, _, _ := h.db.log()
	if r := h.db.row(pid(0)); r.State != service.StatePreparing || len(ts) != 1 {
		t.Fatalf("row %s after %s; want PREPARING, nothing written after it", r.State, describeTransitions(ts))
	}
	h.db.mu.Lock()
	dropped := h.db.dropped
	h.db.mu.Unlock()
	if dropped != 1 {
		t.Fatalf("pending checkpoint dropped %d times at the end; want once", dropped)
	}
}

// TestTakeoverOfARowAnotherOwnerHolds: a realignment the fence refuses
// (the row is another owner's) ends the worker; nothing is recorded.
func TestTakeoverOfARowAnotherOwnerHolds(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 3)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 3)
	h.checkpointed(0, service.StateMirroring, 3, 3, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 3})
	h.db.update(pid(0), func(r *repo.Partition) { r.LeaseOwner, r.LeaseEpoch = "other", 9 })
	w := h.run(0, hOwner, hEpoch, "crashed")
	w.waitExited(t)
	if ts, rs, _ := h.db.log(); len(ts) != 0 || len(rs) != 0 {
		t.Fatalf("a fenced-out worker wrote %s and %d realignments", describeTransitions(ts), len(rs))
	}
}

// TestWaitingForAnEarlierSessionsCopiesIsNoted: a partition whose earlier
// session's copies are still unanswered says so in its row while it waits
// to align.
func TestWaitingForAnEarlierSessionsCopiesIsNoted(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 2)
	h.watch.unanswered = 3
	h.addRow(0, nil)
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	_, _, noted := h.db.log()
	if len(noted) != 1 || noted[0].state != service.StatePreparing {
		t.Fatalf("noted %+v; want one note while PREPARING", noted)
	}
	wantContains(t, "note", noted[0].msg, "waiting for the destination to answer 3 copies of an earlier session")
	wantContains(t, "note", noted[0].msg, "they are written off after 1s")
}

// TestStopSettlesCopiesInFlight: a worker stopped while copies are
// unanswered closes its session and waits for their answers before it
// saves: the hand-back's checkpoint covers them.
func TestStopSettlesCopiesInFlight(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 4)
	h.copy.hold = true
	h.addRow(0, nil)
	w := h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.waitDestination(0, 4) // appended, not yet answered
	stopped := make(chan struct{})
	go func() { w.w.Stop(); close(stopped) }()
	h.copy.mu.Lock()
	closing := h.copy.closing
	h.copy.mu.Unlock()
	select {
	case <-closing: // the session is closed: no more deliveries, only settling
	case <-time.After(waitFor):
		t.Fatal("the session was not closed")
	}
	h.copy.release()
	select {
	case <-stopped:
	case <-time.After(waitFor):
		t.Fatal("Stop did not return once the copies were answered")
	}
	r := h.db.row(pid(0))
	if *r.SrcNext != 4 || *r.DstNext != 4 || r.HandedBackDst != 4 {
		t.Fatalf("stopped at (%d, %d), handed back at %d; want every answered copy in a clean hand-back at 4",
			*r.SrcNext, *r.DstNext, r.HandedBackDst)
	}
}

// TestDeliveryTimeoutFailsAndAlignmentKeepsWhatLanded: copies the
// destination appended but never acknowledged within the delivery timeout
// fail the session retryably; the retry's alignment finds them landed,
// verifies them, and resumes after them: nothing is copied twice.
func TestDeliveryTimeoutFailsAndAlignmentKeepsWhatLanded(t *testing.T) {
	h := newHarness(t, 1)
	h.cfg.DeliveryTimeout = 50 * time.Millisecond
	h.src.produce(0, 4)
	h.copy.hold = true
	h.addRow(0, nil)
	h.start(0)
	h.db.waitRow(t, pid(0), "MIRRORING again after a failure", func(r repo.Partition) bool {
		return r.State == service.StateMirroring && r.RetryAttempt == 1
	})
	f := h.transitionTo(service.StateFailed)
	wantContains(t, "error", f.Error, "produce to destination offset 0 (source offset 0): not acknowledged within the delivery timeout")
	if s, d := checkpointOf(h.lastTransition()); s != 4 || d != 4 {
		t.Fatalf("MIRRORING again at (%d, %d); want (4, 4), after the copies that landed", s, d)
	}
	wantContains(t, "reason", h.lastTransition().Reason, "verified 4 record(s) written past the checkpoint")
	h.src.produce(0, 2)
	h.waitDestination(0, 6)
	h.sameAsSource(0, 0, 0)
}

// TestStopWithCopiesNeverAnswered: a worker stopped while a stuck
// producer answers nothing waits for its copies a delivery timeout and a
// margin, then hands them over to the destination watch (KeepUnsettled,
// up to the end it produced) and ends without a clean hand-back: its
// checkpoint stays at what was verified.
func TestStopWithCopiesNeverAnswered(t *testing.T) {
	h := newHarness(t, 1)
	h.cfg.DeliveryTimeout = 50 * time.Millisecond
	h.src.produce(0, 4)
	h.copy.hold, h.copy.stuck = true, true
	h.addRow(0, nil)
	w := h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.waitDestination(0, 4)
	w.w.Stop()
	h.watch.mu.Lock()
	ends := slices.Clone(h.watch.unsettledEnds)
	h.watch.mu.Unlock()
	if !slices.Equal(ends, []int64{4}) {
		t.Fatalf("copies handed over up to %v; want [4]", ends)
	}
	r := h.db.row(pid(0))
	if r.HandedBackDst != -1 || *r.DstNext != 0 || r.State != service.StateMirroring {
		t.Fatalf("row %s at %d, handed back at %d; want MIRRORING at 0, not handed back", r.State, *r.DstNext, r.HandedBackDst)
	}
	if ts, _, _ := h.db.log(); len(ts) != 2 {
		t.Fatalf("transitions %s; want no FAILED for a stop", describeTransitions(ts))
	}
}

// TestPanicInAStepIsARetryableFailure: a panic in a step fails the
// partition retryably, naming the panic, and the retry goes on.
func TestPanicInAStepIsARetryableFailure(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 2)
	h.addRow(0, nil)
	var once sync.Once
	h.cfg.BeforeStep.Hook(func(p StepPoint) {
		if p.State == service.StatePreparing {
			once.Do(func() { panic("boom") })
		}
	})
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	f := h.transitionTo(service.StateFailed)
	if !f.Retryable || f.Error != "panic in partition worker: boom" {
		t.Fatalf("FAILED %q, retryable %v; want the panic, retried", f.Error, f.Retryable)
	}
	h.waitDestination(0, 2)
}

// TestTopicGoneEndsTheWorker: a topic whose row is gone (its mirror was
// deleted), even after the desire cache is read again, ends the worker
// without a write.
func TestTopicGoneEndsTheWorker(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 2)
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredPaused })
	h.checkpointed(0, service.StatePaused, 0, 0)
	w := h.start(0)
	h.cfg.BeforeStep.WaitOrTimeout(t) // PAUSED, idle
	h.db.removeTopic(hMirror, hTopic)
	w.waitExited(t)
	h.db.mu.Lock()
	refreshes := h.db.refreshes
	h.db.mu.Unlock()
	if ts, _, _ := h.db.log(); len(ts) != 0 || refreshes != 1 {
		t.Fatalf("transitions %s, %d refreshes; want none and one", describeTransitions(ts), refreshes)
	}
}

// TestTakeoverOfAFailoverWithTheSourceDown: an instance dies while a
// failover stops its partitions, and the source is down, as it often is in
// a failover. The new owner cannot re-align; the partition still reaches
// STOPPED (the destination writable), and its rows say it was failed over,
// not that it was removed before it ever mirrored.
func TestTakeoverOfAFailoverWithTheSourceDown(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 5)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 5)
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredStopped })
	h.checkpointed(0, service.StateStopping, 5, 5, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 5})
	h.src.with(func(s *fakeSource) { s.sourceFault = errors.New("source cluster unreachable") })
	h.run(0, hOwner, hEpoch, "crashed")
	h.db.waitState(t, pid(0), service.StateStopped)
	ts, _, _ := h.db.log()
	for _, tr := range ts {
		if strings.Contains(tr.Reason, "before mirroring started") {
			t.Fatalf("transition %s -> %s says %q of a partition that mirrored", tr.From, tr.To, tr.Reason)
		}
	}
	if tr := h.transitionTo(service.StateStopping); !strings.Contains(tr.Reason, "failover") {
		t.Fatalf("STOPPING again with reason %q; want it to say failover", tr.Reason)
	}
}

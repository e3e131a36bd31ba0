package worker

import (
	"slices"
	"testing"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
)

// Continue (continue.go): a topic added with continue over a destination
// that holds the source's history. The proof itself is
// service.ProveContinuation's, which the Source port runs with the
// clusters filled in; these tests set what it answers (or let the real one
// refuse from the source's __mirror_state alone) and check what the worker
// does with each answer.

// continuing sets the topic's desire to continue (and keep a divergent
// tail when keep is set).
func (h *harness) continuing(keep bool) {
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.ContinueHistory, d.KeepDivergent = true, keep })
}

// renameDestination mirrors into a destination topic of the source's own
// name, as a failback does: the source's __mirror_state names the
// partition by it.
func (h *harness) renameDestination() {
	h.dest = hTopic
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.DestTopic = hTopic })
}

// stoppedMirror is the source's __mirror_state record of mirror back,
// which copied this destination's topic (its source) into this source up
// to destination offset lastDst → source offset lastSrc, and stopped.
func stoppedMirror(state service.PartitionState, lastDst, lastSrc int64) service.StateSnapshot {
	return service.StateSnapshot{
		Mirrors: []service.MirrorRecord{{Name: "back"}},
		Partitions: []service.PartitionRecord{{Mirror: "back", Topic: hTopic, Partition: 0, State: state,
			LastMirroredSrc: ptr(lastDst), LastMirroredDst: ptr(lastSrc)}},
	}
}

// TestContinueProven: a new partition over a destination whose records
// are proven to be the source's history starts after the overlap with the
// proof's offset map, records that it keeps no divergent tail, and copies
// only what follows.
func TestContinueProven(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 10)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 5)
	h.continuing(false)
	h.src.continuation = &service.PartitionContinuation{Outcome: service.ContinueAfterOverlap, Proof: service.ProofRecords,
		SrcNext: 5, DstNext: 5, Runs: []repo.OffsetRun{{SrcStart: 0, DstStart: 0, Count: 5}}, Detail: "proven by the test"}
	h.addRow(0, nil)
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)

	if len(h.src.proved) != 1 {
		t.Fatalf("the continuation was proven %d times through the source; want once", len(h.src.proved))
	}
	in := h.src.proved[0]
	if in.Topic != hTopic || in.DestTopic != hDest || in.Partition != 0 || in.KeepDivergent ||
		in.SourceOffsets != (kafkaconn.PartitionOffsets{Start: 0, End: 10}) ||
		in.DestinationOffsets != (kafkaconn.PartitionOffsets{Start: 0, End: 5}) {
		t.Fatalf("proved %+v", in)
	}
	tr := h.transitionTo(service.StateMirroring)
	if s, d := checkpointOf(tr); s != 5 || d != 5 {
		t.Fatalf("MIRRORING at (%d, %d); want (5, 5)", s, d)
	}
	wantContains(t, "reason", tr.Reason, "continued: proven by the test")
	if len(h.db.tails) != 1 || h.db.tails[0] != nil {
		t.Fatalf("divergent tails recorded %v; want one nil", h.db.tails)
	}
	if runs := h.db.runsOf(pid(0)); !slices.Equal(runs, []repo.OffsetRun{{SrcStart: 0, DstStart: 0, Count: 5}}) {
		t.Fatalf("offset map %v; want the proof's", runs)
	}
	h.waitDestination(0, 10)
	h.sameAsSource(0, 0, 0)
}

// TestContinueRefused: a continuation that cannot be proven fails the
// partition for good with the proof's reason, and nothing is recorded or
// copied. Two refusals come from service.ProveContinuation itself, from
// the source's __mirror_state alone.
func TestContinueRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state service.StateSnapshot
		pc    *service.PartitionContinuation
		why   string
	}{
		{name: "the other mirror still runs", state: stoppedMirror(service.StateMirroring, 4, 4),
			why: "continue t/0: mirror back on the source's side is MIRRORING, not STOPPED"},
		{name: "the destination lost records since", state: stoppedMirror(service.StateStopped, 7, 7),
			why: "the destination ends at offset 5, before the last mirrored offset 7 that mirror back copied from it"},
		{name: "a divergent tail without keep_divergent", pc: &service.PartitionContinuation{
			Outcome: service.ContinueRefused, Detail: "the destination holds 2 record(s) at offsets [5, 7) (a divergent tail)"},
			why: "continue t/0: the destination holds 2 record(s) at offsets [5, 7) (a divergent tail)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1)
			h.renameDestination()
			h.src.produce(0, 10)
			h.dst.createTopic(hTopic, 1)
			h.mirrored(0, 0, 5)
			h.continuing(false)
			h.src.state, h.src.continuation = tc.state, tc.pc
			h.addRow(0, nil)
			h.start(0)
			r := h.waitFailed(0, false, tc.why)
			if r.SrcNext != nil || len(h.db.tails) != 0 || len(h.db.runsOf(pid(0))) != 0 || h.copy.batches != 0 {
				t.Fatalf("a refused continue left checkpoint %v, tails %v, runs %v, %d batches",
					r.SrcNext, h.db.tails, h.db.runsOf(pid(0)), h.copy.batches)
			}
		})
	}
}

// TestContinueKeepsADivergentTail: with keep_divergent, a destination
// that holds records past the overlap that the source never had keeps
// them: the tail is recorded on the row, and mirroring goes on after it.
func TestContinueKeepsADivergentTail(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 10)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 5)
	h.dst.append(hDest, 0, rec(100), rec(101))
	h.continuing(true)
	tail := &service.DivergentTail{Start: 5, End: 7, Records: 2}
	h.src.continuation = &service.PartitionContinuation{Outcome: service.ContinueAfterOverlap, Proof: service.ProofOffsetMap,
		SrcNext: 5, DstNext: 7, DivergentTail: tail, Runs: []repo.OffsetRun{{SrcStart: 0, DstStart: 0, Count: 5}},
		Detail: "kept a divergent tail of 2 record(s)"}
	h.addRow(0, nil)
	h.start(0)
	r := h.db.waitState(t, pid(0), service.StateMirroring)
	if !h.src.proved[0].KeepDivergent {
		t.Fatal("keep_divergent was not asked of the proof")
	}
	if r.DivergentTail == nil || *r.DivergentTail != *tail {
		t.Fatalf("row's divergent tail %v; want %v", r.DivergentTail, tail)
	}
	if s, d := checkpointOf(h.transitionTo(service.StateMirroring)); s != 5 || d != 7 {
		t.Fatalf("MIRRORING at (%d, %d); want (5, 7), after the tail", s, d)
	}
	h.waitDestination(0, 12)
	h.sameAsSource(0, 7, 5)
	if got := h.dst.records(hDest, 0); string(got[5].Value) != "value 100" || string(got[6].Value) != "value 101" {
		t.Fatal("the divergent tail was not kept")
	}
}

// TestContinueOnRestart: a restarted partition with continue whose
// destination moved past its checkpoint is proven afresh only when a
// mirror in the source's __mirror_state wrote there (a failback the other
// way); the map of its earlier life is replaced by the proof's. Otherwise
// (not a failback) it aligns as any restart does.
func TestContinueOnRestart(t *testing.T) {
	t.Run("failback", func(t *testing.T) {
		h := newHarness(t, 1)
		h.renameDestination()
		h.src.produce(0, 10)
		h.dst.createTopic(hTopic, 1)
		h.mirrored(0, 0, 6)
		h.continuing(false)
		h.src.state = stoppedMirror(service.StateStopped, 5, 7)
		h.src.continuation = &service.PartitionContinuation{Outcome: service.ContinueAfterOverlap,
			SrcNext: 8, DstNext: 6, Runs: []repo.OffsetRun{{SrcStart: 2, DstStart: 0, Count: 6}}, Detail: "proven again"}
		h.checkpointed(0, service.StateStopped, 3, 3, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 3})
		h.start(0)
		h.db.waitState(t, pid(0), service.StateMirroring)
		if runs := h.db.runsOf(pid(0)); !slices.Equal(runs, []repo.OffsetRun{{SrcStart: 2, DstStart: 0, Count: 6}}) {
			t.Fatalf("offset map %v; want only the proof's (the earlier map deleted)", runs)
		}
		if s, d := checkpointOf(h.transitionTo(service.StateMirroring)); s != 8 || d != 6 {
			t.Fatalf("MIRRORING at (%d, %d); want (8, 6)", s, d)
		}
		h.waitDestination(0, 8)
		h.sameAsSource(0, 6, 8)
	})
	t.Run("not a failback", func(t *testing.T) {
		h := newHarness(t, 1)
		h.src.produce(0, 10)
		h.dst.createTopic(hDest, 1)
		h.mirrored(0, 0, 8)
		h.continuing(false)
		h.checkpointed(0, service.StateStopped, 5, 5, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 5})
		h.start(0)
		h.db.waitState(t, pid(0), service.StateMirroring)
		if h.src.mirrorReads != 1 || len(h.src.proved) != 0 {
			t.Fatalf("read the source's state %d times and proved %d times; want 1 and 0", h.src.mirrorReads, len(h.src.proved))
		}
		tr := h.transitionTo(service.StateMirroring)
		wantContains(t, "reason", tr.Reason, "verified 3 record(s)")
		h.waitDestination(0, 10)
		h.sameAsSource(0, 0, 0)
	})
}

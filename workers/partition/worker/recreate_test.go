package worker

import (
	"bytes"
	"sync"
	"testing"

	"kmirror/repo"
	"kmirror/service"
)

// TestRestartWithRecreate: a topic restarted with recreate over a
// destination that holds what cannot be aligned: partition 0's worker
// drops and recreates the destination topic and forgets every partition's
// checkpoint and offset map; partition 1's waits in PREPARING until it
// has, then reloads its (now empty) checkpoint. Both then mirror the
// source from its start, and the source topic's id is recorded afresh.
func TestRestartWithRecreate(t *testing.T) {
	h := newHarness(t, 2)
	for p := range int32(2) {
		h.src.produce(p, 5)
	}
	h.dst.createTopic(hDest, 2)
	for p := range int32(2) {
		h.dst.append(hDest, p, rec(50), rec(51), rec(52)) // foreign records
		h.checkpointed(p, service.StateStopped, 3, 3, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 3})
	}
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.Recreate = true })
	// Partition 1 first, so that it is waiting when partition 0 recreates.
	// It has decided to wait once it has read the desire in PREPARING:
	// its second read (STOPPED's step read the first).
	h.start(1)
	h.db.waitRow(t, pid(1), "PREPARING, desire read", func(r repo.Partition) bool {
		h.db.mu.Lock()
		defer h.db.mu.Unlock()
		return r.State == service.StatePreparing && h.db.desireReads >= 2
	})
	h.start(0)
	for p := range int32(2) {
		h.db.waitState(t, pid(p), service.StateMirroring)
	}
	if len(h.dst.recreated) != 1 || h.dst.recreated[0] != hDest || h.db.recreated != 1 {
		t.Fatalf("recreated %v (recorded %d times); want %s once, by partition 0", h.dst.recreated, h.db.recreated, hDest)
	}
	ts, _, _ := h.db.log()
	for _, tr := range ts {
		if tr.To != service.StateMirroring {
			continue
		}
		if s, d := checkpointOf(tr); s != 0 || d != 0 {
			t.Fatalf("partition %d MIRRORING at (%d, %d); want (0, 0)", tr.Partition, s, d)
		}
		wantContains(t, "reason", tr.Reason, "new: mirroring from source offset 0")
	}
	if d, _ := (fakeDesires{h.db}).Desire(hMirror, hTopic); d.Recreate {
		t.Fatal("the recreate request was not cleared")
	}
	h.db.mu.Lock()
	refreshes := h.db.refreshes
	h.db.mu.Unlock()
	if refreshes == 0 {
		t.Fatal("the desired states were not read again after the recreate")
	}
	if id := h.db.topic(hMirror, hTopic).sourceID; !bytes.Equal(id, srcID) {
		t.Fatalf("source topic id %x after the recreate; want %x recorded afresh", id, srcID)
	}
	for p := range int32(2) {
		h.waitDestination(p, 5)
		h.sameAsSource(p, 0, 0)
	}
}

// TestRecreateJustAfterAPartitionEnteredPreparing: partition 0 finishes
// the recreate between partition 1's STOPPED → PREPARING (whose stored row
// still had the old checkpoint) and its PREPARING step, which then reads
// the request as cleared. Partition 1 should then start as new, from the
// source's start with nothing lost, as it does when it waited for the
// recreate.
//
// Before the worker read its checkpoint again there, it aligned with the
// one it held from before the recreate, "rewound" against the empty
// destination to the start of an offset map that was gone (source offset
// 0), and counted the records retention removed before mirroring began as
// lost.
func TestRecreateJustAfterAPartitionEnteredPreparing(t *testing.T) {
	h := newHarness(t, 2)
	h.src.produce(1, 5)
	h.src.with(func(s *fakeSource) { s.partitions[1].removeBefore(2) })
	h.dst.createTopic(hDest, 2)
	h.dst.append(hDest, 1, rec(50), rec(51), rec(52))
	h.checkpointed(1, service.StateStopped, 3, 3, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 3})
	h.addRow(0, func(r *repo.Partition) { r.LeaseOwner = "other" })
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.Recreate = true })
	// Partition 0's worker, elsewhere, completes the recreate right
	// before partition 1's first PREPARING step.
	var once sync.Once
	h.cfg.BeforeStep.Hook(func(p StepPoint) {
		if p.Key.Partition == 1 && p.State == service.StatePreparing {
			once.Do(func() {
				_ = h.dst.RecreateTopic(t.Context(), hDest, 2, 1)
				f := repo.LeaseFence{Mirror: hMirror, Topic: hTopic, Partition: 0, Owner: "other", Epoch: hEpoch}
				if err := (fakeTopics{h.db}).RecordDestinationRecreated(t.Context(), f); err != nil {
					t.Error(err)
				}
			})
		}
	})
	h.start(1)
	r := h.db.waitState(t, pid(1), service.StateMirroring)
	tr := h.transitionTo(service.StateMirroring)
	if s, d := checkpointOf(tr); s != 2 || d != 0 || r.LostRecords != 0 {
		t.Fatalf("MIRRORING at (%d, %d) with %d lost (%q); want (2, 0) with none lost", s, d, r.LostRecords, tr.Reason)
	}
}

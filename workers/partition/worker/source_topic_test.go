package worker

import (
	"bytes"
	"testing"

	"kmirror/repo"
	"kmirror/service"
)

// The source topic's id (source_topic_id.go): recorded when mirroring
// begins, compared at every alignment and resume. A different id is a
// source topic deleted and created again.

var recreatedID = []byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// recreateSource gives the source topic a new id (2), as a topic deleted
// and created again has.
func (h *harness) recreateSource() {
	h.src.with(func(s *fakeSource) { s.id = [16]byte{2} })
}

// TestRecreatedSourceTopicFailsForGood: a restart that finds the source
// topic's id changed fails for good, keeps the recorded id, and copies
// nothing, even though the offsets would line up.
func TestRecreatedSourceTopicFailsForGood(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 10)
	h.dst.createTopic(hDest, 1)
	h.mirrored(0, 0, 5)
	h.checkpointed(0, service.StateStopped, 5, 5, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 5})
	h.recreateSource()
	h.start(0)
	h.waitFailed(0, false, "source topic t was deleted and recreated (topic id 02000000000000000000000000000000, "+
		"mirrored from 01000000000000000000000000000000)")
	if id := h.db.topic(hMirror, hTopic).sourceID; !bytes.Equal(id, srcID) || len(h.db.accepted) != 0 {
		t.Fatalf("recorded id %x, accepted %v; want the first id kept", id, h.db.accepted)
	}
	if h.copy.batches != 0 {
		t.Fatal("records of a recreated source topic were copied")
	}
}

// TestTheFirstSourceTopicIDIsKept: a partition that finds another
// partition's id recorded compares with it rather than recording its own.
func TestTheFirstSourceTopicIDIsKept(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 3)
	h.db.mu.Lock()
	h.db.topics[[2]string{hMirror, hTopic}].sourceID = recreatedID
	h.db.mu.Unlock()
	h.addRow(0, nil) // a new partition of a topic whose id is recorded
	h.start(0)
	h.waitFailed(0, false, "source topic t was deleted and recreated")
	if id := h.db.topic(hMirror, hTopic).sourceID; !bytes.Equal(id, recreatedID) {
		t.Fatalf("recorded id %x; want the first one, %x", id, recreatedID)
	}
}

// TestResumeChecksTheSourceTopicID: PAUSED → MIRRORING skips alignment but
// not the source topic's id: a topic recreated while paused fails the
// resume for good.
func TestResumeChecksTheSourceTopicID(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 5)
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredPaused })
	h.dst.createTopic(hDest, 1)
	h.checkpointed(0, service.StatePaused, 0, 0)
	h.start(0)
	h.cfg.BeforeStep.WaitOrTimeout(t) // PAUSED, idle
	h.recreateSource()
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredMirroring })
	// (resumeCheck wraps it as "resume: ...", but handle takes the
	// *failure from the chain and writes its own message: the prefix is
	// never seen.)
	h.waitFailed(0, false, "source topic t was deleted and recreated")
	if ts, _, _ := h.db.log(); len(ts) != 1 || ts[0].From != service.StatePaused {
		t.Fatalf("transitions %s; want only PAUSED → FAILED", describeTransitions(ts))
	}
}

// TestContinueAcceptsARecreatedSourceTopic: with continue, a recreated
// source topic whose history the destination holds (the other side
// recreated it from here in a failback) is accepted once proven: the new
// id replaces the recorded one, and mirroring goes on. A proof that is
// refused leaves the recorded id.
func TestContinueAcceptsARecreatedSourceTopic(t *testing.T) {
	for _, proven := range []bool{true, false} {
		name := "proven"
		if !proven {
			name = "refused"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 1)
			h.renameDestination()
			h.src.produce(0, 10)
			h.dst.createTopic(hTopic, 1)
			h.mirrored(0, 0, 6)
			h.continuing(false)
			h.src.state = stoppedMirror(service.StateStopped, 5, 5)
			pc := &service.PartitionContinuation{Outcome: service.ContinueAfterOverlap,
				SrcNext: 6, DstNext: 6, Runs: []repo.OffsetRun{{SrcStart: 0, DstStart: 0, Count: 6}}, Detail: "proven"}
			if !proven {
				pc = &service.PartitionContinuation{Outcome: service.ContinueRefused, Detail: "not this history"}
			}
			h.src.continuation = pc
			h.checkpointed(0, service.StateStopped, 3, 3, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 3})
			h.recreateSource()
			h.start(0)
			if !proven {
				h.waitFailed(0, false, "continue t/0: not this history")
				if id := h.db.topic(hMirror, hTopic).sourceID; !bytes.Equal(id, srcID) {
					t.Fatalf("a refused continue recorded the new id %x", id)
				}
				return
			}
			h.db.waitState(t, pid(0), service.StateMirroring)
			if len(h.db.accepted) != 1 || !bytes.Equal(h.db.accepted[0][0], srcID) || !bytes.Equal(h.db.accepted[0][1], recreatedID) {
				t.Fatalf("accepted %x; want %x → %x", h.db.accepted, srcID, recreatedID)
			}
			if id := h.db.topic(hMirror, hTopic).sourceID; !bytes.Equal(id, recreatedID) {
				t.Fatalf("recorded id %x; want the new one", id)
			}
			wantContains(t, "reason", h.transitionTo(service.StateMirroring).Reason,
				"the source topic was recreated (topic id 02000000000000000000000000000000) and holds this history")
			h.waitDestination(0, 10)
			h.sameAsSource(0, 0, 0)
		})
	}
}

package metadatasync_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/metadatasync"
	"kmirror/workers/workertest"
)

// TestSyncKindPanicStaysLocal: a panic in one sync kind fails that kind
// for that pass, with the panic as its error; the other kinds run and
// succeed, and the next pass is whole again.
func TestSyncKindPanicStaysLocal(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	env.startSyncNode("i1", workertest.InstanceOpts{SyncerSignals: func(s *metadatasync.SyncerTestSignals) {
		s.BeforeKind.Hook(func(kind string) {
			if kind == "acls" && armed.CompareAndSwap(true, false) {
				panic("injected fault")
			}
		})
	}})
	env.syncCreateMirror("m1", "orders", service.SourceInput{}, nil)
	env.syncWaitTopic("m1", "orders", service.StateMirroring, 20*time.Second)
	// The mirror's first pass may still be to come: partitions can reach
	// MIRRORING before the syncer takes the mirror's lease. Arm the fault
	// only after a whole pass, so the pass that trips it is the one asked
	// for below.
	mustOK(t, env.syncNow("m1"))

	armed.Store(true)
	res := env.syncNow("m1")
	if res.OK || res.ACLs.OK || !strings.Contains(res.ACLs.Error, "panic: injected fault") {
		t.Fatalf("pass with a panicking acls kind: ok=%v acls=%+v", res.OK, res.ACLs)
	}
	for name, o := range map[string]service.SyncOutcome{"topic_configs": res.TopicConfigs, "partitions": res.Partitions,
		"new_topics": res.NewTopics, "deleted_topics": res.DeletedTopics, "paused_topics": res.PausedTopics} {
		if !o.OK {
			t.Errorf("%s failed alongside the panicking kind: %+v", name, o)
		}
	}
	if !res.GroupOffsets.OK {
		t.Errorf("group_offsets failed alongside the panicking kind: %+v", res.GroupOffsets)
	}
	mustOK(t, env.syncNow("m1"))
}

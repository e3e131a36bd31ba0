package partition_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"kmirror/internal/devenv/devcluster"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioCleanHandBack: an instance that stops gracefully under
// traffic marks each partition it hands back with the destination offset
// it settled at, and the next owner resumes every one of them after one
// offset check, without reading records back. After a crash there is no
// mark, and the next owner verifies as before. Either way the takeover
// ends the mark, the rows say the partitions are aligned under their new
// epoch, and the copy is exact.
func TestScenarioCleanHandBack(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	topics := []string{"h0", "h1", "h2"}
	for _, topic := range topics {
		if err := env.Clusters.Source.CreateTopic(topic, 10, nil); err != nil {
			t.Fatal(err)
		}
	}
	env.CreateMirror("m", "h[0-2]")
	stopTraffic := startTraffic(t, env.Clusters.SourceAddr(), topics, 10)
	a, b := env.StartInstance("a"), env.StartInstance("b")
	waitShare(t, env, 30*time.Second, a, b)
	waitCopying(t, env)

	// A graceful stop of a: each of its partitions is taken over cleanly.
	handed := a.Engine.Running()
	a.Stop()
	waitShare(t, env, 30*time.Second, b)
	waitAligned(t, env)
	for _, k := range handed {
		if msg := lastOwnerEvent(t, env, k.Topic, k.Partition); !strings.Contains(msg, "handed back cleanly") {
			t.Errorf("%s/%d after a graceful stop: %q, want a clean hand-back", k.Topic, k.Partition, msg)
		}
	}

	// A crash of b: no mark, so its partitions are verified as before.
	a = env.StartInstance("a")
	waitShare(t, env, 30*time.Second, a, b)
	waitCopying(t, env)
	crashed := b.Engine.Running()
	b.Crash()
	waitShare(t, env, workertest.TTL+20*time.Second, a)
	waitAligned(t, env)
	for _, k := range crashed {
		if msg := lastOwnerEvent(t, env, k.Topic, k.Partition); strings.Contains(msg, "handed back cleanly") {
			t.Errorf("%s/%d after a crash: %q, want no clean hand-back", k.Topic, k.Partition, msg)
		}
	}

	produced := stopTraffic()
	for _, topic := range topics {
		workertest.WaitEndsEqual(t, env.Env, topic, 10, 60*time.Second)
	}
	for _, p := range env.Partitions("m") {
		if p.HandedBackDst != -1 || p.AlignedEpoch != p.LeaseEpoch || p.Realigning() {
			t.Errorf("%s/%d: handed back at %d, aligned at epoch %d under epoch %d: the takeover should end the mark and align",
				p.Topic, p.Partition, p.HandedBackDst, p.AlignedEpoch, p.LeaseEpoch)
		}
	}
	t.Logf("%d records produced; %d partitions handed back, %d taken after a crash", produced, len(handed), len(crashed))
}

// waitAligned waits until no partition is being re-aligned after a
// takeover: a new owner runs a partition, and its row names it, before it
// has re-aligned it.
func waitAligned(t *testing.T, env *engineEnv) {
	t.Helper()
	workertest.WaitFor(t, 30*time.Second, "every partition aligned under its owner's epoch", func() (bool, string) {
		var re []string
		for _, p := range env.Partitions("m") {
			if p.Realigning() {
				re = append(re, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
			}
		}
		return len(re) == 0, fmt.Sprintf("re-aligning: %v", re)
	})
}

// waitCopying waits until every partition is aligned under its owner and
// has saved a checkpoint past where it stood then: its mirroring session
// runs. Sharing is settled by rows and running workers before that, and an
// instance stopped while it still re-aligns what it took over hands those
// partitions back before any session could mark them.
func waitCopying(t *testing.T, env *engineEnv) {
	t.Helper()
	waitAligned(t, env)
	from := map[string]int64{}
	for _, p := range env.Partitions("m") {
		if p.DstNext != nil {
			from[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = *p.DstNext
		}
	}
	workertest.WaitFor(t, 30*time.Second, "every partition copying under its owner", func() (bool, string) {
		var still []string
		for _, p := range env.Partitions("m") {
			k := fmt.Sprintf("%s/%d", p.Topic, p.Partition)
			// Copying: its checkpoint moved under the new owner, or it is
			// aligned with nothing to copy (the checkpoint may have caught
			// up with the source before from was read).
			caughtUp := p.SrcNext != nil && p.SourceEndOffset != nil && *p.SrcNext >= *p.SourceEndOffset
			if p.Realigning() || p.DstNext == nil || (*p.DstNext <= from[k] && !caughtUp) {
				still = append(still, k)
			}
		}
		return len(still) == 0, fmt.Sprintf("not yet copying: %v", still)
	})
}

// lastOwnerEvent returns the message of the partition's latest owner-change
// event.
func lastOwnerEvent(t *testing.T, env *engineEnv, topic string, p int32) string {
	t.Helper()
	evs, err := repo.EventsList(context.Background(), env.Pool, repo.EventsListParams{Mirror: "m", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("%s/%d: owner ", topic, p)
	last := ""
	for _, e := range evs { // oldest first
		if e.Kind == service.EventPartitionOwner && strings.HasPrefix(e.Message, prefix) {
			last = e.Message
		}
	}
	return last
}

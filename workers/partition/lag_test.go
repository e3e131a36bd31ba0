package partition_test

import (
	"fmt"
	"testing"
	"time"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestLagKnownForEmptyPartitions: a mirroring partition's ends come from its
// session's fetches, and the periodic listing skips it once one is stored;
// an empty partition fetches nothing, so the listing must still store its
// first ends: describe shows lag 0 within a refresh or two, not after the
// 30 s full round.
func TestLagKnownForEmptyPartitions(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.CreateSourceTopics(3, "empty")
	env.CreateMirror("m", "empty")
	env.StartInstanceOpts("i1", workertest.InstanceOpts{ProductionTimings: true})
	env.WaitStates("m", service.StateMirroring, 30*time.Second)
	// The server's timings list ends every 2 s and all of them every 30 s.
	workertest.WaitFor(t, 10*time.Second, "source ends of the empty partitions", func() (bool, string) {
		for _, p := range env.Partitions("m") {
			if p.SourceEndOffset == nil || *p.SourceEndOffset != 0 {
				return false, fmt.Sprintf("empty/%d source end %v", p.Partition, p.SourceEndOffset)
			}
		}
		return true, ""
	})
}

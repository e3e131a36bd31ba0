package partition_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioRealigningShowsLiveLag: while a new owner re-aligns a
// partition it took over (here the destination holds every offset read, so
// the re-alignment cannot end), describe says the partition is re-aligning
// under its new owner, and its lag counts the records written to the
// source since the hand-back: from the source's live end, not the end the
// old owner last saved. Once the destination answers, the partition copies
// them and describe says it is aligned, with no lag.
func TestScenarioRealigningShowsLiveLag(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("rl", 1, nil); err != nil {
		t.Fatal(err)
	}
	env.CreateMirror("m", "rl")
	a := env.StartInstance("a")
	produce := func(prefix string, n int) {
		t.Helper()
		workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("rl", 0, prefix, n)...)
	}
	produce("a", 100)
	workertest.WaitEndsEqual(t, env.Env, "rl", 1, 30*time.Second)
	waitCopying(t, env)
	a.Stop()

	// From here the destination answers no ListOffsets until released:
	// the new owner's one offset check of a clean hand-back waits on it.
	var holding atomic.Bool
	var held atomic.Int32
	holding.Store(true)
	release := make(chan struct{})
	releaseAll := sync.OnceFunc(func() { holding.Store(false); close(release) })
	defer releaseAll()
	dst := env.Clusters.Destination
	dst.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		if holding.Load() {
			held.Add(1)
			dst.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	// describe returns rl/0's describe row, and what it says for a log.
	describe := func() (service.PartitionRow, bool, string) {
		rows, err := env.Svc.TopicPartitions(ctx, "m", "rl")
		if err != nil || len(rows) != 1 {
			return service.PartitionRow{}, false, fmt.Sprint(rows, err)
		}
		r := rows[0]
		lag := int64(-1)
		if r.Lag != nil {
			lag = *r.Lag
		}
		return r, true, fmt.Sprintf("state %s realigning %v owner %q lag %d; %d offset reads held",
			r.State, r.Realigning, r.Owner, lag, held.Load())
	}

	env.StartInstance("b")
	produce("b", 40)
	workertest.WaitFor(t, 20*time.Second, "describe to show rl/0 re-aligning under b, 40 records behind", func() (bool, string) {
		r, ok, says := describe()
		return ok && r.Realigning && r.Owner == "b" && r.Lag != nil && *r.Lag == 40, says
	})

	releaseAll()
	workertest.WaitEndsEqual(t, env.Env, "rl", 1, 30*time.Second)
	workertest.WaitFor(t, 20*time.Second, "describe to show rl/0 aligned under b, caught up", func() (bool, string) {
		r, ok, says := describe()
		return ok && !r.Realigning && r.Owner == "b" && r.Lag != nil && *r.Lag == 0, says
	})
	workertest.AssertMirrored(t, env.Env, "rl", 1)
}

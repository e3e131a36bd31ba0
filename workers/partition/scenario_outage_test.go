package partition_test

import (
	"strings"
	"testing"
	"time"

	"kmirror/internal/devenv/devcluster"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// outage is how long a cluster stays down in the outage scenarios.
const outage = 20 * time.Second

// outageEnv mirrors topic orders (2 partitions, 20 records each) from
// clusters that keep their data on disk, so one can go down and come back.
func outageEnv(t *testing.T) *engineEnv {
	env := newEngineEnv(t, devcluster.Config{DataDir: t.TempDir()})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("orders", p, "before", 20)...)
	}
	env.CreateMirror("m", "orders")
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 20*time.Second)
	return env
}

// TestScenarioSourceDown: the source is down for 20s under a mirroring
// topic. The partitions stay MIRRORING and say in their error that fetches
// fail; when the source is back they catch up by themselves, the error
// clears, nothing goes through FAILED, and the destination holds exactly
// the source's records.
func TestScenarioSourceDown(t *testing.T) {
	t.Parallel()
	env := outageEnv(t)
	if err := env.Clusters.Down("source"); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	for p := int32(0); p < 2; p++ {
		env.waitPartition("m", "orders", p, outage, "the fetch error while MIRRORING", func(r repo.Partition) bool {
			return r.State == service.StateMirroring && strings.Contains(r.Error, "fetching from the source has failed")
		})
	}
	time.Sleep(time.Until(down.Add(outage))) // the rest of the injected outage
	if err := env.Clusters.Up("source"); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("orders", p, "after", 20)...)
	}
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 60*time.Second)
	for p := int32(0); p < 2; p++ {
		env.waitPartition("m", "orders", p, 20*time.Second, "MIRRORING with the error cleared", func(r repo.Partition) bool {
			return r.State == service.StateMirroring && r.Error == ""
		})
		steps, msgs := env.stateEvents("m", "orders", p)
		for i, st := range steps {
			if strings.Contains(st, "FAILED") {
				t.Errorf("orders/%d: %s", p, msgs[i])
			}
		}
	}
}

// TestScenarioDestinationDown: the destination is down for 20s while the
// source keeps getting records. The partitions show the error (FAILED and
// retried with backoff, or MIRRORING with a produce still in flight), and
// when the destination is back they catch up by themselves: the
// destination holds exactly the source's records, nothing lost and
// nothing duplicated.
func TestScenarioDestinationDown(t *testing.T) {
	t.Parallel()
	env := outageEnv(t)
	if err := env.Clusters.Down("destination"); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	for p := int32(0); p < 2; p++ {
		workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("orders", p, "during", 20)...)
	}
	seen := map[int32]bool{}
	workertest.WaitFor(t, outage, "a destination error in every row", func() (bool, string) {
		for _, r := range env.Partitions("m") {
			if r.Error != "" {
				seen[r.Partition] = true
			}
		}
		return len(seen) == 2, ""
	})
	time.Sleep(time.Until(down.Add(outage))) // the rest of the injected outage
	if err := env.Clusters.Up("destination"); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("orders", p, "after", 20)...)
	}
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 90*time.Second)
	env.WaitStates("m", service.StateMirroring, 30*time.Second)
}

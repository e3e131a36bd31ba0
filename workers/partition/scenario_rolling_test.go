package partition_test

import (
	"strings"
	"testing"
	"time"

	"kmirror/internal/devenv/devcluster"
	"kmirror/workers/workertest"
)

// TestScenarioRollingRestart: three instances share 30 partitions under
// steady traffic and are restarted one at a time, first gracefully (leases
// handed back) and then by crash (leases left to expire). Ownership moves
// every time, yet no partition goes through FAILED, and in the end the
// destination holds exactly the source's records: nothing lost, nothing
// duplicated.
func TestScenarioRollingRestart(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	topics := []string{"r0", "r1", "r2"}
	for _, topic := range topics {
		if err := env.Clusters.Source.CreateTopic(topic, 10, nil); err != nil {
			t.Fatal(err)
		}
	}
	env.CreateMirror("m", "r[0-2]")
	stopTraffic := startTraffic(t, env.Clusters.SourceAddr(), topics, 10)
	ins := []*workertest.Instance{env.StartInstance("a"), env.StartInstance("b"), env.StartInstance("c")}
	waitShare(t, env, 30*time.Second, ins...)

	for round, crash := range []bool{false, true} {
		for i := range ins {
			if crash {
				ins[i].Crash()
			} else {
				ins[i].Stop()
			}
			// The others take its partitions (at once after a hand-back,
			// after the lease TTL after a crash), then it comes back.
			others := append(append([]*workertest.Instance{}, ins[:i]...), ins[i+1:]...)
			waitShare(t, env, workertest.TTL+20*time.Second, others...)
			ins[i] = env.StartInstance(ins[i].ID)
			waitShare(t, env, 30*time.Second, ins...)
			t.Logf("round %d: %s restarted (crash=%v)", round, ins[i].ID, crash)
		}
	}

	produced := stopTraffic()
	for _, topic := range topics {
		workertest.WaitEndsEqual(t, env.Env, topic, 10, 60*time.Second)
	}
	failed := 0
	for _, topic := range topics {
		for p := int32(0); p < 10; p++ {
			steps, msgs := env.stateEvents("m", topic, p)
			for i, st := range steps {
				if strings.Contains(st, "FAILED") {
					failed++
					t.Errorf("%s/%d: %s", topic, p, msgs[i])
				}
			}
		}
	}
	t.Logf("%d records produced through 6 restarts; %d FAILED transitions", produced, failed)
}

package partition_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioSharing: three instances share 30 partitions evenly; when one
// crashes the survivors take its partitions back to MIRRORING within the
// lease TTL plus a few seconds; when it comes back the shares even out
// again. A producer runs throughout, and in the end the destination holds
// exactly the source's records: nothing lost, nothing duplicated.
func TestScenarioSharing(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	topics := []string{"s0", "s1", "s2"}
	for _, topic := range topics {
		if err := env.Clusters.Source.CreateTopic(topic, 10, nil); err != nil {
			t.Fatal(err)
		}
		workertest.Produce(t, env.Clusters.SourceAddr(), topic, 10, 5, kgo.NoCompression())
	}
	env.CreateMirror("m", "s[0-2]")
	stopTraffic := startTraffic(t, env.Clusters.SourceAddr(), topics, 10)
	a, b, c := env.StartInstance("a"), env.StartInstance("b"), env.StartInstance("c")

	waitShare(t, env, 20*time.Second, a, b, c)

	c.Crash()
	killed := time.Now()
	waitShare(t, env, workertest.TTL+5*time.Second, a, b)
	t.Logf("survivors took over in %s", time.Since(killed).Round(10*time.Millisecond))

	c2 := env.StartInstance("c")
	waitShare(t, env, 20*time.Second, a, b, c2)

	produced := stopTraffic()
	t.Logf("%d records produced while instances came and went", produced)
	for _, topic := range topics {
		workertest.WaitEndsEqual(t, env.Env, topic, 10, 30*time.Second)
	}

	// A crash, a rejoin and the hand-backs it causes are ownership
	// changes, not failures: no partition went through FAILED, and each
	// takeover left an owner event instead.
	for _, topic := range topics {
		for p := int32(0); p < 10; p++ {
			steps, msgs := env.stateEvents("m", topic, p)
			for i, st := range steps {
				if strings.Contains(st, "FAILED") {
					t.Errorf("%s/%d: %s", topic, p, msgs[i])
				}
			}
		}
	}
	evs, err := repo.EventsList(context.Background(), env.Pool, repo.EventsListParams{Mirror: "m", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var fromCrashed, handedBack int
	for _, e := range evs {
		switch {
		case e.Kind != service.EventPartitionOwner:
		case strings.Contains(e.Message, "owner c → "):
			fromCrashed++
		case strings.Contains(e.Message, " → c at"):
			handedBack++
		}
	}
	if fromCrashed == 0 || handedBack == 0 {
		t.Errorf("owner events: %d from the crashed c, %d to the returning c; want some of each", fromCrashed, handedBack)
	}
	t.Logf("owner events: %d partitions taken over from the crashed c, %d handed to the returning c", fromCrashed, handedBack)
}

// waitShare waits until the instances between them run all 30 partitions,
// each its even share ±1, every one MIRRORING and leased by the instance
// that runs it.
func waitShare(t *testing.T, env *engineEnv, timeout time.Duration, ins ...*workertest.Instance) {
	t.Helper()
	const total = 30
	share := total / len(ins)
	workertest.WaitFor(t, timeout, fmt.Sprintf("%d partitions MIRRORING, shared by %d instances", total, len(ins)), func() (bool, string) {
		runner := map[string]string{}
		ok := true
		var desc []string
		for _, in := range ins {
			running := in.Engine.Running()
			desc = append(desc, fmt.Sprintf("%s runs %d", in.ID, len(running)))
			if len(running) < share-1 || len(running) > share+1 {
				ok = false
			}
			for _, k := range running {
				runner[fmt.Sprintf("%s/%d", k.Topic, k.Partition)] = in.ID
			}
		}
		ps := env.Partitions("m")
		if len(ps) != total || len(runner) != total {
			ok = false
		}
		var bad []string
		for _, p := range ps {
			key := fmt.Sprintf("%s/%d", p.Topic, p.Partition)
			if p.State != service.StateMirroring || p.LeaseOwner != runner[key] {
				ok = false
				bad = append(bad, fmt.Sprintf("%s owner=%s runner=%s", describePartition(p), p.LeaseOwner, runner[key]))
			}
		}
		sort.Strings(bad)
		if len(bad) > 5 {
			bad = append(bad[:5], fmt.Sprintf("… %d more", len(bad)-5))
		}
		return ok, strings.Join(desc, ", ") + "; " + strings.Join(bad, "; ")
	})
}

// startTraffic produces to every partition of the topics until the returned
// function is called; it returns how many records were written.
func startTraffic(t *testing.T, addr string, topics []string, partitions int32) func() int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var n int
	var ferr error
	wg.Go(func() {
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for round := 0; ; round++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var rs []*kgo.Record
			for _, topic := range topics {
				for p := int32(0); p < partitions; p++ {
					rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("r%d", round)),
						Value:   []byte(fmt.Sprintf("%s/%d round %d", topic, p, round)),
						Headers: []kgo.RecordHeader{{Key: "round", Value: []byte(fmt.Sprint(round))}}})
				}
			}
			// Not cancelled by ctx: every round is written whole.
			if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
				ferr = err
				return
			}
			n += len(rs)
		}
	})
	stopped := false
	stop := func() int {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
			cl.Close()
		}
		if ferr != nil {
			t.Fatalf("traffic: %v", ferr)
		}
		return n
	}
	t.Cleanup(func() { stop() })
	return stop
}

package partition_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"kmirror/internal/devcluster"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// outageEmpty is how long the destination stays down before it comes back
// empty.
const outageEmpty = 8 * time.Second

// TestScenarioDestinationComesBackEmpty: the destination cluster goes away
// under traffic and comes back empty (rebuilt, or its disks replaced).
// Within seconds of its return every partition says in its error that the
// destination lost its records; the topic is recreated and re-mirrored from
// the source's log start without an operator, and within a minute the
// destination holds exactly the source's records, with no partition left
// FAILED and an event saying what happened.
func TestScenarioDestinationComesBackEmpty(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 3, nil); err != nil {
		t.Fatal(err)
	}
	stopTraffic := startTraffic(t, env.Clusters.SourceAddr(), []string{"orders"}, 3)
	env.CreateMirror("m", "orders")
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitFor(t, 20*time.Second, "every partition to copy records", func() (bool, string) {
		for _, r := range env.Partitions("m") {
			if r.DstNext == nil || *r.DstNext < 20 {
				return false, describePartition(r)
			}
		}
		return true, ""
	})

	if err := env.Clusters.Down("destination"); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	workertest.WaitFor(t, 20*time.Second, "the destination outage in every row", func() (bool, string) {
		var desc []string
		ok := true
		for _, r := range env.Partitions("m") {
			ok = ok && r.Error != ""
			desc = append(desc, describePartition(r))
		}
		return ok, strings.Join(desc, "; ")
	})
	// Longer than a session waits for its copies (the delivery timeout
	// plus 2 s): the sessions end with copies in flight that no broker
	// will answer, as after the 20 s outage.
	time.Sleep(time.Until(down.Add(outageEmpty)))
	if err := env.Clusters.UpEmpty("destination"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()

	workertest.WaitFor(t, 10*time.Second, "every row to say the destination lost its records", func() (bool, string) {
		var desc []string
		ok := true
		for _, r := range env.Partitions("m") {
			ok = ok && strings.Contains(r.Error, "destination") && strings.Contains(r.Error, "lost")
			desc = append(desc, describePartition(r))
		}
		return ok, strings.Join(desc, "; ")
	})
	t.Logf("loss reported %s after the destination came back", time.Since(back).Round(time.Millisecond))

	workertest.WaitFor(t, 60*time.Second, "every partition MIRRORING again with the error cleared and progress past the loss", func() (bool, string) {
		var desc []string
		ok := true
		for _, r := range env.Partitions("m") {
			ok = ok && r.State == service.StateMirroring && r.Error == "" && r.ProgressedAt != nil && r.ProgressedAt.After(back)
			desc = append(desc, describePartition(r))
		}
		return ok, strings.Join(desc, "; ")
	})
	written := stopTraffic()
	workertest.WaitEndsEqual(t, env.Env, "orders", 3, 60*time.Second)
	t.Logf("exact again %s after the destination came back (%d records written to the source)",
		time.Since(back).Round(time.Millisecond), written)
	for _, r := range env.Partitions("m") {
		if r.State != service.StateMirroring || r.LostRecords != 0 {
			t.Errorf("orders/%d after healing: %s", r.Partition, describePartition(r))
		}
	}
	assertLossEvents(t, env, "orders", 3)
}

// assertLossEvents checks that each partition recorded one realignment that
// names the destination's loss and where mirroring starts again.
func assertLossEvents(t *testing.T, env *engineEnv, topic string, partitions int32) {
	t.Helper()
	evs, err := repo.EventsList(context.Background(), env.Pool, repo.EventsListParams{Mirror: "m", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	found := map[int32]string{}
	for _, e := range evs {
		if e.Topic == topic && e.Kind == service.EventPartitionRealigned &&
			strings.Contains(e.Message, "destination lost its records; re-mirroring from offset") && e.Partition != nil {
			found[*e.Partition] = e.Message
		}
	}
	for p := int32(0); p < partitions; p++ {
		if found[p] == "" {
			var all []string
			for _, e := range evs {
				all = append(all, fmt.Sprintf("%s %s", e.Kind, e.Message))
			}
			t.Fatalf("%s/%d: no realignment event names the destination's loss; events:\n%s", topic, p, strings.Join(all, "\n"))
		}
	}
}

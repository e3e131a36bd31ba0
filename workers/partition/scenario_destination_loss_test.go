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
	// Two instances share the topic: each writes off its own copies in
	// flight, and neither creates the topic again before the other has.
	env.StartInstance("i1")
	env.StartInstance("i2")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitFor(t, 20*time.Second, "both instances to hold partitions", func() (bool, string) {
		owners := map[string]int{}
		for _, r := range env.Partitions("m") {
			if r.State == service.StateMirroring {
				owners[r.LeaseOwner]++
			}
		}
		return owners["i1"] > 0 && owners["i2"] > 0, fmt.Sprint(owners)
	})
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
	// will answer, as after an outage of 20 s.
	time.Sleep(time.Until(down.Add(outageEmpty)))
	if err := env.Clusters.UpEmpty("destination"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()

	// Each row says so until it is re-aligned; they need not all say it
	// in the same poll. A partition whose copies were unanswered when the
	// destination went away was FAILED (retrying) meanwhile: it says so in
	// the reason of its way back to MIRRORING instead.
	said := map[int32]bool{}
	workertest.WaitFor(t, 10*time.Second, "every row to say the destination lost its records", func() (bool, string) {
		var desc []string
		for _, r := range env.Partitions("m") {
			if strings.Contains(r.Error, "destination") && strings.Contains(r.Error, "lost") {
				said[r.Partition] = true
			}
			desc = append(desc, describePartition(r))
		}
		for p := range lossEvents(t, env, "orders") {
			said[p] = true
		}
		return len(said) == 3, strings.Join(desc, "; ")
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
// names the destination's loss and where mirroring starts again: in place,
// or on its way back from FAILED (PREPARING to MIRRORING).
func assertLossEvents(t *testing.T, env *engineEnv, topic string, partitions int32) {
	t.Helper()
	found := lossEvents(t, env, topic)
	for p := int32(0); p < partitions; p++ {
		if found[p] == "" {
			evs, _ := repo.EventsList(context.Background(), env.Pool, repo.EventsListParams{Mirror: "m", Limit: 1000})
			var all []string
			for _, e := range evs {
				all = append(all, fmt.Sprintf("%s %s", e.Kind, e.Message))
			}
			t.Fatalf("%s/%d: no realignment event names the destination's loss; events:\n%s", topic, p, strings.Join(all, "\n"))
		}
	}
}

// lossEvents returns, by partition, the message of a realignment event that
// names the destination's loss.
func lossEvents(t *testing.T, env *engineEnv, topic string) map[int32]string {
	t.Helper()
	evs, err := repo.EventsList(context.Background(), env.Pool, repo.EventsListParams{Mirror: "m", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	found := map[int32]string{}
	for _, e := range evs {
		if e.Topic == topic && (e.Kind == service.EventPartitionRealigned || e.Kind == service.EventPartitionState) &&
			strings.Contains(e.Message, "destination lost its records") && e.Partition != nil {
			found[*e.Partition] = e.Message
		}
	}
	return found
}

// TestScenarioRecreateWhenDestinationTopicIsGone: a restart with recreate
// on a topic whose destination topic was deleted meanwhile, and a first add
// with recreate of a topic the destination never had. A topic that is
// already gone counts as deleted: both mirror from the source's start, with
// no failed step (UNKNOWN_TOPIC_OR_PARTITION from the deletion is not a
// failure to retry).
func TestScenarioRecreateWhenDestinationTopicIsGone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := newEngineEnv(t, devcluster.Config{})
	for _, topic := range []string{"inventory", "fresh"} {
		if err := env.Clusters.Source.CreateTopic(topic, 2, nil); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq(topic, p, "r", 10)...)
		}
	}
	env.CreateMirror("m", "inventory")
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitEndsEqual(t, env.Env, "inventory", 2, 20*time.Second)
	if _, err := env.Svc.RemoveTopics(ctx, "m", "inventory"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StateStopped, 20*time.Second)
	if err := env.Clusters.Destination.DeleteTopic("inventory"); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"inventory", "fresh"} {
		if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: topic, Recreate: true}); err != nil {
			t.Fatal(err)
		}
	}
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	for _, topic := range []string{"inventory", "fresh"} {
		workertest.WaitMirrored(t, env.Env, topic, 2, 20*time.Second)
		for p := int32(0); p < 2; p++ {
			steps, msgs := env.stateEvents("m", topic, p)
			for i, st := range steps {
				if strings.Contains(st, "FAILED") {
					t.Errorf("%s/%d: %s: %s", topic, p, st, msgs[i])
				}
			}
		}
	}
}

// TestScenarioHandBackWithUnansweredCopies: a partition is handed back (a
// second instance takes its share) while the destination is down with its
// last copies in flight, which kgo retries until it learns their outcome.
// The lease stays this instance's while they may still land, but not
// forever: once they have gone unanswered for SettledWaitMax they are
// written off and the lease is released, so the other instance takes the
// partition, still during the outage, and mirrors it exactly once the
// destination is back. The row names the first instance's live session
// while no worker of it runs the partition for SettledWaitMax at most,
// however long the copies go unanswered.
func TestScenarioHandBackWithUnansweredCopies(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{DataDir: t.TempDir()})
	if err := env.Clusters.Source.CreateTopic("handback", 2, nil); err != nil {
		t.Fatal(err)
	}
	env.CreateMirror("m", "handback")
	const settledWaitMax = 3 * time.Second
	env.StartInstanceOpts("i1", workertest.InstanceOpts{SettledWaitMax: settledWaitMax})
	produce := func(prefix string, n int) {
		t.Helper()
		for p := range int32(2) {
			workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("handback", p, prefix, n)...)
		}
	}
	produce("a", 50)
	workertest.WaitEndsEqual(t, env.Env, "handback", 2, 30*time.Second)

	// The destination takes i1's next produce request and goes down before
	// answering it: kgo cannot know whether those copies landed, so it
	// retries them until the destination answers.
	waitHeld := holdNextProduce(env, time.Hour)
	produce("b", 20)
	waitHeld(t)
	if err := env.Clusters.Down("destination"); err != nil {
		t.Fatal(err)
	}
	env.StartInstanceOpts("i2", workertest.InstanceOpts{SettledWaitMax: settledWaitMax})
	workertest.WaitFor(t, 30*time.Second, "a partition's lease to move to i2 while the destination is down", func() (bool, string) {
		var desc []string
		moved := false
		for _, p := range env.Partitions("m") {
			desc = append(desc, fmt.Sprintf("%s owner=%s", describePartition(p), p.LeaseOwner))
			moved = moved || p.LeaseOwner == "i2"
		}
		return moved, strings.Join(desc, "; ")
	})
	if err := env.Clusters.Up("destination"); err != nil {
		t.Fatal(err)
	}
	produce("c", 20)
	workertest.WaitEndsEqual(t, env.Env, "handback", 2, 60*time.Second)
	env.WaitStates("m", service.StateMirroring, 30*time.Second)
}

// TestScenarioSourceComesBackEmpty: the source cluster goes away and comes
// back empty, its topic created again. What was mirrored is no longer on
// it: that is said within seconds (FAILED, not retried, naming the
// recreated source), not shown as MIRRORING at lag 0 while nothing can be
// copied.
func TestScenarioSourceComesBackEmpty(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 2, 30)
	if err := env.Clusters.Down("source"); err != nil {
		t.Fatal(err)
	}
	if err := env.Clusters.UpEmpty("source"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	workertest.WaitFor(t, 10*time.Second, "every partition to say the source lost what was mirrored", func() (bool, string) {
		var desc []string
		ok := true
		for _, r := range env.Partitions("m") {
			ok = ok && r.State == service.StateFailed && !r.Retryable && strings.Contains(r.Error, "recreated")
			desc = append(desc, describePartition(r))
		}
		return ok, strings.Join(desc, "; ")
	})
	t.Logf("said %s after the source came back", time.Since(back).Round(time.Millisecond))
}

// TestScenarioIdleDestinationComesBackEmpty: the destination comes back
// empty while its partitions copy nothing, so no copy goes unanswered. The
// engine's sweep of every session still finds the topic gone within
// destinationSweepEvery (2 s): the topic is recreated and its records
// mirrored again, with an event naming the loss.
func TestScenarioIdleDestinationComesBackEmpty(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 2, 20)
	if err := env.Clusters.Down("destination"); err != nil {
		t.Fatal(err)
	}
	if err := env.Clusters.UpEmpty("destination"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 30*time.Second)
	t.Logf("exact again %s after the destination came back", time.Since(back).Round(time.Millisecond))
	assertLossEvents(t, env, "orders", 2)
}

// TestScenarioRebuiltDestinationOffsetsFollow: the destination comes back
// empty under partitions that copy nothing at the moment (the soak's
// quiet ones). Within 5 s every row's destination offset follows it: no
// row claims more than the destination holds, as the stale checkpoint's
// end would (a row reading MIRRORING, no error, destination offset 20,
// while the destination holds 0).
func TestScenarioRebuiltDestinationOffsetsFollow(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	const parts = 4
	env.startMirrored("orders", parts, 20)
	if err := env.Clusters.Down("destination"); err != nil {
		t.Fatal(err)
	}
	if err := env.Clusters.UpEmpty("destination"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	dst := workertest.Plain(env.Clusters.DestinationAddr())
	workertest.WaitFor(t, 5*time.Second, "every row's destination offset to follow the rebuilt destination", func() (bool, string) {
		rows := env.Partitions("m")
		ends := map[int32]int64{} // a topic not there yet holds nothing
		if env.DestHasTopic("orders") {
			ends = workertest.EndOffsets(t, dst, "orders")
		}
		var desc []string
		ok := len(rows) == parts
		for _, r := range rows {
			held := ends[r.Partition]
			if r.DestinationEndOffset == nil || *r.DestinationEndOffset > held {
				ok = false
			}
			desc = append(desc, fmt.Sprintf("%s dst=%v held=%d", describePartition(r), deref(r.DestinationEndOffset), held))
		}
		return ok, strings.Join(desc, "; ")
	})
	t.Logf("rows followed %s after the destination came back", time.Since(back).Round(time.Millisecond))
	workertest.WaitEndsEqual(t, env.Env, "orders", parts, 30*time.Second)
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

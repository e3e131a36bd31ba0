package partition_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/statetopic"
	"kmirror/workers/workertest"
)

// Fan-in (topic.name.prefix): two regions' clusters each have a topic
// orders, and one destination holds them side by side as east.orders and
// west.orders. A partition is still named by its source topic (lease,
// row, checkpoint); only what is asked of the destination uses the
// destination name.

// fanIn is a destination and two source clusters, east (the env's own
// source) and west (a second kfake cluster), each with a topic orders of
// fanInPartitions partitions holding plain records and committed and
// aborted transactions, mirrored by mirrors east and west with prefixes
// "east." and "west.".
type fanIn struct {
	env *engineEnv
	// dst is how the tests and kmirror reach the destination.
	dst     kafkaconn.Config
	sources map[string]kafkaconn.Config // by mirror name
}

const fanInPartitions = 2

// fanInMirrors are the mirrors' names, which are their prefixes too.
var fanInMirrors = []string{"east", "west"}

// newFanIn starts the west cluster, fills both sources and creates the
// mirrors with their topics added; no instance runs yet.
func newFanIn(t *testing.T, env *engineEnv, dst kafkaconn.Config) *fanIn {
	t.Helper()
	west, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("kmirror-test-west"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(west.Close)
	f := &fanIn{env: env, dst: dst, sources: map[string]kafkaconn.Config{
		"east": workertest.Plain(env.Clusters.SourceAddr()),
		"west": {BootstrapServers: west.ListenAddrs()},
	}}
	for _, m := range fanInMirrors {
		src := f.sources[m]
		adm, err := src.NewAdmin()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := adm.CreateTopic(t.Context(), fanInPartitions, 1, nil, "orders")
		adm.Close()
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create orders on %s: %v", m, err)
		}
		// The values name the region, so a copy into the other region's
		// topic cannot pass for an exact one.
		for p := range int32(fanInPartitions) {
			workertest.ProduceRecords(t, src, seq("orders", p, m, 10)...)
		}
		f.produce(t, m, "first", 3)
		if _, err := env.Svc.CreateMirror(t.Context(), service.MirrorInput{Name: m,
			Source: service.SourceInput{BootstrapServers: src.BootstrapServers[0]},
			Config: map[string]string{service.CfgTopicNamePrefix: m + "."}}, service.WriteOpts{}); err != nil {
			t.Fatal(err)
		}
		res, err := env.Svc.AddTopics(t.Context(), m, service.AddTopicsInput{Topic: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Matches) != 1 || res.Matches[0].DestinationTopic != m+".orders" {
			t.Fatalf("mirror %s added %+v, want orders written to %s.orders", m, res.Matches, m)
		}
	}
	return f
}

// produce writes an aborted and a committed transaction, then n plain
// records, to every partition of the mirror's source orders. A log that
// ends in a record, not a marker, is read back without waiting for more.
func (f *fanIn) produce(t *testing.T, mirror, prefix string, n int) {
	t.Helper()
	src := f.sources[mirror]
	produceTransactionsEnding(t, src.BootstrapServers[0], "orders", fanInPartitions, []bool{false, true})
	for p := range int32(fanInPartitions) {
		workertest.ProduceRecords(t, src, seq("orders", p, mirror+"-"+prefix, n)...)
	}
}

// waitCopied waits until the mirror's destination topic holds exactly the
// committed records of its source's orders, in order, in each of its
// first n partitions.
func (f *fanIn) waitCopied(t *testing.T, mirror string, n int32, timeout time.Duration) {
	t.Helper()
	dest := mirror + ".orders"
	workertest.WaitFor(t, timeout, dest+" to be an exact copy of "+mirror+"'s orders", func() (bool, string) {
		var desc []string
		for p := range n {
			src, err := readPartition(f.sources[mirror], "orders", p, true)
			if err != nil {
				t.Fatalf("read %s's orders/%d: %v", mirror, p, err)
			}
			dst, err := readPartition(f.dst, dest, p, false)
			if err != nil {
				return false, fmt.Sprintf("%s/%d: %v", dest, p, err)
			}
			if len(src) != len(dst) {
				return false, fmt.Sprintf("%s/%d holds %d record(s), the source %d", dest, p, len(dst), len(src))
			}
			for i := range src {
				if err := kafkaconn.SameRecord(src[i], dst[i]); err != nil {
					t.Fatalf("%s/%d offset %d is not %s's orders/%d offset %d: %v", dest, p, dst[i].Offset, mirror, p, src[i].Offset, err)
				}
			}
			desc = append(desc, fmt.Sprintf("%s/%d %d", dest, p, len(dst)))
		}
		return true, strings.Join(desc, " ")
	})
}

// readPartition reads every record of a partition, from its log start to
// its end (the last stable offset when committed).
func readPartition(conn kafkaconn.Config, topic string, p int32, committed bool) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm, err := conn.NewAdmin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	off, err := kafkaconn.ReadOffsets(ctx, adm, topic, p, committed)
	if err != nil {
		return nil, err
	}
	return kafkaconn.ReadRecords(ctx, conn, topic, p, off.Start, off.End, int(off.End-off.Start)+1, committed)
}

// appWrite writes one record to partition 0 of a destination topic as the
// ordinary user app.
func appWrite(t *testing.T, addr, topic, value string) error {
	t.Helper()
	conn := kafkaconn.Config{BootstrapServers: []string{addr}, Security: kafkaconn.Security{
		Protocol: "SASL_PLAINTEXT", SASLMechanism: "PLAIN", SASLUsername: "app", SASLPassword: "app-secret"}}
	cl, err := conn.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(),
		kgo.RecordRetries(2), kgo.UnknownTopicRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(value)}).FirstErr()
}

// assertReadOnly checks that the mirror's destination topic is recorded
// and enforced read-only (on) or writable (off): the user app, allowed
// everything on it, is denied or let through.
func (f *fanIn) assertReadOnly(t *testing.T, mirror string, on bool) {
	t.Helper()
	dest := mirror + ".orders"
	if v := f.env.readOnlyEnforced(mirror, "orders"); v == nil || *v != on {
		t.Fatalf("mirror %s: read_only_enforced = %v, want %v", mirror, v, on)
	}
	err := appWrite(t, f.env.Clusters.DestinationAddr(), dest, "by-app")
	switch {
	case on && err == nil:
		t.Fatalf("app could write to %s, which is mirrored", dest)
	case on && !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED"):
		t.Fatalf("app's write to %s failed for another reason: %v", dest, err)
	case !on && err != nil:
		t.Fatalf("app cannot write to %s after its failover: %v", dest, err)
	}
}

// assertNoSourceNamedTopic checks that nothing created a destination topic
// under the source name.
func (f *fanIn) assertNoSourceNamedTopic(t *testing.T) {
	t.Helper()
	if f.env.DestHasTopic("orders") {
		t.Fatal("the destination has a topic orders: something used the source name on the destination")
	}
}

// TestScenarioFanIn: two source clusters' orders, with committed and
// aborted transactions, are copied exactly into east.orders and
// west.orders of one destination, each read-only, and no destination
// topic orders is made. West fails over alone: its ACL is lifted on
// west.orders only, while east keeps mirroring into a read-only
// east.orders. West restarts with recreate (the app's write is dropped)
// and both mirrors' partitions are taken over by another instance after a
// crash, re-aligning against their destination topics and mirroring on.
func TestScenarioFanIn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	allowApp := func(topic string) kfake.ACL {
		return kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: topic,
			Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true}
	}
	env := newEngineEnv(t, devcluster.Config{DestinationOpts: []kfake.Opt{
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"), kfake.EnableACLs(),
		kfake.User("PLAIN", "app", "app-secret", allowApp("east.orders"), allowApp("west.orders"))}})
	dst := kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()},
		Security: kafkaconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: "PLAIN",
			SASLUsername: "admin", SASLPassword: "secret"}}
	f := newFanIn(t, env, dst)
	i1 := env.StartInstanceOpts("i1", workertest.InstanceOpts{Dest: dst})
	for _, m := range fanInMirrors {
		env.WaitStates(m, service.StateMirroring, 20*time.Second)
	}
	for _, m := range fanInMirrors {
		f.waitCopied(t, m, fanInPartitions, 20*time.Second)
		f.assertReadOnly(t, m, true)
	}
	f.assertNoSourceNamedTopic(t)

	// While mirroring: plain records and transactions, an aborted one among them.
	for _, m := range fanInMirrors {
		f.produce(t, m, "live", 5)
	}
	for _, m := range fanInMirrors {
		f.waitCopied(t, m, fanInPartitions, 20*time.Second)
	}

	// West fails over; east goes on.
	if _, err := env.Svc.RemoveTopics(ctx, "west", "orders"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("west", service.StateStopped, 20*time.Second)
	f.assertReadOnly(t, "west", false)
	f.assertReadOnly(t, "east", true)
	f.produce(t, "east", "after-west-failover", 5)
	f.waitCopied(t, "east", fanInPartitions, 20*time.Second)
	for p := range int32(fanInPartitions) {
		if r := env.Partition("east", "orders", p); r.State != service.StateMirroring || r.Error != "" {
			t.Fatalf("east's orders/%d after west's failover: %s", p, describePartition(r))
		}
	}

	// West restarts with recreate: west.orders, which took app's write, is
	// dropped and copied afresh, and read-only again.
	f.produce(t, "west", "after-failover", 3)
	if _, err := env.Svc.AddTopics(ctx, "west", service.AddTopicsInput{Topic: "orders", Recreate: true}); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("west", service.StateMirroring, 20*time.Second)
	f.waitCopied(t, "west", fanInPartitions, 20*time.Second)
	f.assertReadOnly(t, "west", true)

	// i1 crashes: i2 takes every partition over and re-aligns it against
	// its destination topic (the crash handed nothing back, so the last
	// copied record is read back from it) before mirroring on.
	i1.Crash()
	env.StartInstanceOpts("i2", workertest.InstanceOpts{Dest: dst})
	for _, m := range fanInMirrors {
		for p := range int32(fanInPartitions) {
			env.waitPartition(m, "orders", p, workertest.TTL+20*time.Second, "re-aligned by i2", func(r repo.Partition) bool {
				return r.LeaseOwner == "i2" && r.AlignedEpoch == r.LeaseEpoch && r.State == service.StateMirroring && r.Error == ""
			})
		}
		f.produce(t, m, "after-takeover", 5)
	}
	for _, m := range fanInMirrors {
		f.waitCopied(t, m, fanInPartitions, 20*time.Second)
		f.assertReadOnly(t, m, true)
		for p := range int32(fanInPartitions) {
			if !ownerEvent(t, env, m, p, "i2") {
				t.Errorf("%s's orders/%d: no partition.owner event names the takeover by i2", m, p)
			}
		}
	}
	f.assertNoSourceNamedTopic(t)
}

// ownerEvent says whether a partition.owner event of the mirror's
// orders/p names owner as the new one.
func ownerEvent(t *testing.T, env *engineEnv, mirror string, p int32, owner string) bool {
	t.Helper()
	evs, err := repo.EventsList(context.Background(), env.Pool, repo.EventsListParams{Mirror: mirror, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == service.EventPartitionOwner && e.Topic == "orders" && e.Partition != nil && *e.Partition == p &&
			strings.Contains(e.Message, "→ "+owner) {
			return true
		}
	}
	return false
}

// TestScenarioFanInDestinationLoss: east.orders is deleted on the
// destination by hand while nothing is copied. The destination watch's
// sweep finds it missing, by its destination name: east's partitions say
// so, create it again and copy east's orders afresh. West's partitions, of
// the same source name, are not touched: no error, no realignment, and
// their copies go on.
func TestScenarioFanInDestinationLoss(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	f := newFanIn(t, env, workertest.Plain(env.Clusters.DestinationAddr()))
	env.StartInstance("i1")
	for _, m := range fanInMirrors {
		env.WaitStates(m, service.StateMirroring, 20*time.Second)
		f.waitCopied(t, m, fanInPartitions, 20*time.Second)
	}
	if err := env.Clusters.Destination.DeleteTopic("east.orders"); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	// No copy is in flight to go unanswered: the sweep of every session,
	// every 10 s, is what finds the topic gone.
	workertest.WaitFor(t, 30*time.Second, "east's partitions to re-align after the loss", func() (bool, string) {
		found := realignments(t, env, "east")
		return len(found) == fanInPartitions, fmt.Sprint(found)
	})
	for p, msg := range realignments(t, env, "east") {
		if !strings.Contains(msg, "topic east.orders is missing on the destination") {
			t.Errorf("east's orders/%d re-aligned without naming east.orders' loss: %s", p, msg)
		}
	}
	f.waitCopied(t, "east", fanInPartitions, 30*time.Second)
	t.Logf("east.orders exact again %s after its loss", time.Since(lost).Round(time.Millisecond))
	for _, m := range fanInMirrors {
		f.produce(t, m, "after-east-loss", 5)
	}
	for _, m := range fanInMirrors {
		f.waitCopied(t, m, fanInPartitions, 20*time.Second)
	}
	if found := realignments(t, env, "west"); len(found) != 0 {
		t.Fatalf("east.orders' loss touched west's partitions: %v", found)
	}
	for p := range int32(fanInPartitions) {
		r := env.Partition("west", "orders", p)
		if r.State != service.StateMirroring || r.Error != "" || r.AlignedEpoch != r.LeaseEpoch {
			t.Fatalf("west's orders/%d after east.orders' loss: %s", p, describePartition(r))
		}
		steps, msgs := env.stateEvents("west", "orders", p)
		if len(steps) != 2 {
			t.Fatalf("west's orders/%d changed state after east.orders' loss: %q", p, msgs)
		}
	}
	f.assertNoSourceNamedTopic(t)
}

// realignments returns, by partition, the messages of the mirror's events
// that re-aligned a partition in place or on its way back from FAILED.
func realignments(t *testing.T, env *engineEnv, mirror string) map[int32]string {
	t.Helper()
	evs, err := repo.EventsList(context.Background(), env.Pool, repo.EventsListParams{Mirror: mirror, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	found := map[int32]string{}
	for _, e := range evs {
		if e.Partition == nil || e.Topic != "orders" {
			continue
		}
		if e.Kind == service.EventPartitionRealigned || (e.Kind == service.EventPartitionState && strings.Contains(e.Message, "FAILED")) {
			found[*e.Partition] = e.Message
		}
	}
	return found
}

// TestScenarioFanInContinue: a destination topic west.orders that already
// holds a copy of west's first records, as another tool would have named
// it (MirrorMaker 2's "west.orders"), is continued by a mirror with prefix
// "west.": the add's dry run and the partition prove the overlap by
// records, reading the destination by its name, and only what follows is
// copied.
func TestScenarioFanInContinue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := newEngineEnv(t, devcluster.Config{})
	src, dst := workertest.Plain(env.Clusters.SourceAddr()), workertest.Plain(env.Clusters.DestinationAddr())
	env.CreateSourceTopics(1, "orders")
	workertest.ProduceRecords(t, src, seq("orders", 0, "west", 10)...)
	first, err := readPartition(src, "orders", 0, true)
	if err != nil {
		t.Fatal(err)
	}
	env.CreateDestinationTopics(1, "west.orders")
	var copied []*kgo.Record
	for _, r := range first {
		copied = append(copied, &kgo.Record{Topic: "west.orders", Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
	}
	workertest.ProduceRecords(t, dst, copied...)
	workertest.ProduceRecords(t, src, seq("orders", 0, "west-new", 5)...)
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "west",
		Source: service.SourceInput{BootstrapServers: env.Clusters.SourceAddr()},
		Config: map[string]string{service.CfgTopicNamePrefix: "west."}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}

	preview, err := service.NewControl(service.Config{Pool: env.Pool, Catalog: service.KafkaCatalog(5 * time.Second),
		Destination: dst, SourceState: statetopic.ReadState})
	if err != nil {
		t.Fatal(err)
	}
	res, err := preview.AddTopics(ctx, "west", service.AddTopicsInput{Topic: "orders", Continue: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Continuation) != 1 || res.Continuation[0].DestinationTopic != "west.orders" || res.Continuation[0].DestinationMissing ||
		len(res.Continuation[0].Partitions) != 1 {
		t.Fatalf("preview: %+v, want west.orders with one partition", res.Continuation)
	}
	if pc := res.Continuation[0].Partitions[0]; pc.Outcome != service.ContinueAfterOverlap || pc.Proof != service.ProofRecords ||
		pc.OverlapSourceOffset == nil || *pc.OverlapSourceOffset != 9 || pc.RecordsToCopy != 5 {
		t.Fatalf("preview of orders/0: %+v, want continue by records after source offset 9, 5 to copy", pc)
	}

	if _, err := env.Svc.AddTopics(ctx, "west", service.AddTopicsInput{Topic: "orders", Continue: true}); err != nil {
		t.Fatal(err)
	}
	env.StartInstanceOpts("i1", workertest.InstanceOpts{SourceState: statetopic.ReadState})
	env.WaitStates("west", service.StateMirroring, 30*time.Second)
	f := &fanIn{env: env, dst: dst, sources: map[string]kafkaconn.Config{"west": src}}
	workertest.ProduceRecords(t, src, seq("orders", 0, "west-live", 3)...)
	f.waitCopied(t, "west", 1, 20*time.Second)
	if _, msgs := env.stateEvents("west", "orders", 0); len(msgs) < 2 || !strings.Contains(msgs[1], "continued") {
		t.Fatalf("orders/0 state events: %q, want PREPARING → MIRRORING continued", msgs)
	}
	f.assertNoSourceNamedTopic(t)
}

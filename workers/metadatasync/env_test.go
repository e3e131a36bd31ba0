package metadatasync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/runtime/notifier"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/lease"
	"kmirror/workers/metadatasync"
	"kmirror/workers/workertest"
)

// engineEnv is the shared test world with this package's helpers.
type engineEnv struct{ *workertest.Env }

func newEngineEnv(t *testing.T, cfg devcluster.Config) *engineEnv {
	return &engineEnv{workertest.NewEnv(t, cfg)}
}

// startSyncNode runs an instance with the metadata syncer.
func (env *engineEnv) startSyncNode(id string, o workertest.InstanceOpts) *workertest.Instance {
	env.T.Helper()
	o.Sync = true
	return env.StartInstanceOpts(id, o)
}

// startSyncOnlyNode runs an instance with the metadata syncer and no data
// plane: it takes the mirrors' metadata leases and no partition's, so the
// partitions stay as the test sets them and the destination holds only
// what the test puts there. producer, if not nil, stands for the engine's
// producer after a destination topic grows.
func (env *engineEnv) startSyncOnlyNode(id string, dest kafkaconn.Config, producer metadatasync.PartitionAwaiter) {
	t := env.T
	t.Helper()
	ctx := context.Background()
	if len(dest.BootstrapServers) == 0 {
		dest = workertest.Plain(env.Clusters.DestinationAddr())
	}
	log := workertest.Logger().With("test", t.Name(), "instance", id)
	notes, err := notifier.New(notifier.Config{Listen: repo.Notifications(env.Pool), Channels: repo.Channels, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := notes.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notes.Stop)
	syncer, err := metadatasync.New(metadatasync.Config{Pool: env.Pool, Service: env.Workers, InstanceID: id,
		Destination: dest, Logger: log, DefaultInterval: time.Hour, Notifier: notes, Timeout: workertest.SyncTimeout,
		Producer: producer})
	if err != nil {
		t.Fatal(err)
	}
	if err := syncer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(syncer.Stop)
	lm, err := lease.NewManager(lease.ManagerConfig{Pool: env.Pool, InstanceID: id, TTL: workertest.TTL,
		RenewInterval: workertest.Renew, Margin: workertest.Margin, Logger: log, Mirrors: syncer, Notifier: notes})
	if err != nil {
		t.Fatal(err)
	}
	if err := lm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lm.Stop) // first: the syncs stop before the syncer closes its clients
}

// syncCreateMirror creates a mirror with a source connection and config,
// then adds the topics matching re, if re is not empty.
func (env *engineEnv) syncCreateMirror(name, re string, src service.SourceInput, cfg map[string]string) {
	t := env.T
	t.Helper()
	ctx := context.Background()
	if src.BootstrapServers == "" {
		src.BootstrapServers = env.Clusters.SourceAddr()
	}
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: name, Source: src, Config: cfg}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if re == "" {
		return
	}
	if _, err := env.Svc.AddTopics(ctx, name, service.AddTopicsInput{Topic: re}); err != nil {
		t.Fatal(err)
	}
}

// syncNow runs a pass through the service, as POST :sync does.
func (env *engineEnv) syncNow(mirror string) service.SyncResult {
	t := env.T
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := env.Svc.SyncMirror(ctx, mirror)
	if err != nil {
		t.Fatalf("sync %s: %v", mirror, err)
	}
	if res.Trigger != service.SyncTriggerRequest {
		t.Fatalf("sync now served by a %q pass", res.Trigger)
	}
	return res
}

// syncAdmin returns an admin client for a cluster, closed at cleanup.
func syncAdmin(t *testing.T, conn kafkaconn.Config) *kadm.Client {
	t.Helper()
	adm, err := conn.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	return adm
}

// syncWaitTopic waits until every partition of a mirror topic is in state.
func (env *engineEnv) syncWaitTopic(mirror, topic string, state service.PartitionState, timeout time.Duration) {
	t := env.T
	t.Helper()
	workertest.WaitFor(t, timeout, fmt.Sprintf("partitions of %s/%s %s", mirror, topic, state), func() (bool, string) {
		ps, err := repo.PartitionsList(context.Background(), env.Pool, repo.PartitionsListParams{Mirror: mirror, Topics: []string{topic}})
		if err != nil {
			t.Fatal(err)
		}
		ok, desc := len(ps) > 0, ""
		for _, p := range ps {
			desc += fmt.Sprintf("%d=%s(%s) ", p.Partition, p.State, p.Error)
			ok = ok && p.State == state
		}
		return ok, desc
	})
}

// dynamicTopicConfigs returns a topic's own (dynamic) configs on a cluster.
func dynamicTopicConfigs(t *testing.T, adm *kadm.Client, topic string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("configs of %s: %v %v", topic, err, rc.Err)
	}
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
			out[c.Key] = *c.Value
		}
	}
	return out
}

// consumeAndCommit consumes a topic with a group, takes the first n records
// of each of its partitions, commits exactly those, and leaves the group.
func consumeAndCommit(t *testing.T, conn kafkaconn.Config, group, topic string, partitions int32, n int, readCommitted bool) map[int32][]*kgo.Record {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}
	if readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := conn.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	taken := map[int32][]*kgo.Record{}
	full := func() bool {
		for p := int32(0); p < partitions; p++ {
			if len(taken[p]) < n {
				return false
			}
		}
		return true
	}
	for !full() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s with %s: took %d partitions' records only", topic, group, len(taken))
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consuming %s with %s: %v", topic, group, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(taken[r.Partition]) < n {
				taken[r.Partition] = append(taken[r.Partition], r)
			}
		})
	}
	var all []*kgo.Record
	for _, rs := range taken {
		all = append(all, rs...)
	}
	if err := cl.CommitRecords(ctx, all...); err != nil {
		t.Fatalf("commit %s: %v", group, err)
	}
	return taken
}

// consumeToEnd consumes a topic with a group from its committed offsets up
// to each partition's current end and returns the records by partition.
func consumeToEnd(t *testing.T, conn kafkaconn.Config, group, topic string, partitions int32) map[int32][]*kgo.Record {
	t.Helper()
	adm := syncAdmin(t, conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := conn.NewClient(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int32][]*kgo.Record{}
	done := func() bool {
		for p := int32(0); p < partitions; p++ {
			e, _ := ends.Lookup(topic, p)
			rs := got[p]
			if e.Offset > 0 && (len(rs) == 0 || rs[len(rs)-1].Offset < e.Offset-1) {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s with %s to its end: timed out", topic, group)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consuming %s with %s: %v", topic, group, err) })
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r) })
	}
	return got
}

// syncWaitCheckpointed waits until the checkpoint of every partition of a
// mirror topic covers the destination's records: what the offset sync may
// translate to.
func (env *engineEnv) syncWaitCheckpointed(mirror, topic string, timeout time.Duration) {
	t := env.T
	t.Helper()
	adm := syncAdmin(t, workertest.Plain(env.Clusters.DestinationAddr()))
	workertest.WaitFor(t, timeout, fmt.Sprintf("checkpoints of %s/%s", mirror, topic), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		ps, err := repo.PartitionsList(ctx, env.Pool, repo.PartitionsListParams{Mirror: mirror, Topics: []string{topic}})
		if err != nil {
			t.Fatal(err)
		}
		ok, desc := len(ps) > 0, ""
		for _, p := range ps {
			e, _ := ends.Lookup(topic, p.Partition)
			done := p.DstNext != nil && *p.DstNext == e.Offset
			desc += fmt.Sprintf("%d:%v/%d ", p.Partition, p.DstNext != nil && done, e.Offset)
			ok = ok && done
		}
		return ok, desc
	})
}

package metadatasync_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/api"
	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// findItem returns the outcome's item for name, failing the test when it
// is missing.
func findItem(t *testing.T, kind string, o service.SyncOutcome, name string) service.SyncItem {
	t.Helper()
	for _, it := range o.Items {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("%s: no item for %s in %+v", kind, name, o)
	return service.SyncItem{}
}

func findGroup(t *testing.T, o service.GroupOffsetsOutcome, group string) service.GroupSync {
	t.Helper()
	for _, g := range o.Groups {
		if g.Group == group {
			return g
		}
	}
	t.Fatalf("group_offsets: no result for group %s in %+v", group, o)
	return service.GroupSync{}
}

func mustOK(t *testing.T, res service.SyncResult) {
	t.Helper()
	if !res.OK {
		b, _ := json.MarshalIndent(res, "", "  ")
		t.Fatalf("sync pass had errors:\n%s", b)
	}
}

func alterConfigs(t *testing.T, adm *kadm.Client, topic string, ops ...kadm.AlterConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.AlterTopicConfigs(ctx, ops, topic)
	if err == nil {
		for _, r := range resp {
			if r.Err != nil {
				err = fmt.Errorf("%w %s", r.Err, r.ErrMessage)
			}
		}
	}
	if err != nil {
		t.Fatalf("alter configs of %s: %v", topic, err)
	}
}

func set(k, v string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)}
}

// TestSyncTopicConfigs: a config changed on the source reaches the
// destination within one pass, excluded ones never do, and a config removed
// on the source returns to its default on the destination.
func TestSyncTopicConfigs(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	env.startSyncNode("i1", workertest.InstanceOpts{})
	env.syncCreateMirror("m1", "orders", service.SourceInput{}, nil)
	env.syncWaitTopic("m1", "orders", service.StateMirroring, 20*time.Second)

	src := syncAdmin(t, workertest.Plain(env.Clusters.SourceAddr()))
	dst := syncAdmin(t, workertest.Plain(env.Clusters.DestinationAddr()))
	// No record is produced after this: compaction wants keys.
	alterConfigs(t, src, "orders", set("retention.ms", "3600000"), set("cleanup.policy", "compact"),
		set("min.insync.replicas", "1"), set("message.timestamp.type", "LogAppendTime"))

	res := env.syncNow("m1")
	mustOK(t, res)
	if it := findItem(t, "topic_configs", res.TopicConfigs, "orders"); it.Action != "updated" ||
		it.Detail != "cleanup.policy=compact, retention.ms=3600000" {
		t.Fatalf("topic_configs item %+v", it)
	}
	got := dynamicTopicConfigs(t, dst, "orders")
	want := map[string]string{"retention.ms": "3600000", "cleanup.policy": "compact"}
	if !maps.Equal(got, want) {
		t.Fatalf("destination configs %v, want %v (min.insync.replicas and message.timestamp.* are excluded)", got, want)
	}

	// In step: nothing to do on the next pass.
	res = env.syncNow("m1")
	mustOK(t, res)
	if len(res.TopicConfigs.Items) != 0 {
		t.Fatalf("second pass changed configs again: %+v", res.TopicConfigs.Items)
	}

	// Removed on the source: back to the default on the destination. A
	// local value of an excluded key is never touched.
	alterConfigs(t, src, "orders", kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"})
	alterConfigs(t, dst, "orders", set("min.insync.replicas", "1"))
	mustOK(t, env.syncNow("m1"))
	got = dynamicTopicConfigs(t, dst, "orders")
	want = map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "1"}
	if !maps.Equal(got, want) {
		t.Fatalf("destination configs %v, want %v", got, want)
	}
}

// TestSyncPartitionGrowth: partitions grown from 3 to 6 on the source are
// created on the destination and mirrored from their start.
func TestSyncPartitionGrowth(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 3, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 3, 20, kgo.NoCompression())
	env.startSyncNode("i1", workertest.InstanceOpts{})
	env.syncCreateMirror("m1", "orders", service.SourceInput{}, nil)
	workertest.WaitMirrored(t, env.Env, "orders", 3, 30*time.Second)

	src := syncAdmin(t, workertest.Plain(env.Clusters.SourceAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := src.CreatePartitions(ctx, 3, "orders"); err != nil || resp.Error() != nil {
		t.Fatalf("grow source topic: %v %v", err, resp.Error())
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 6, 15, kgo.NoCompression())

	res := env.syncNow("m1")
	mustOK(t, res)
	if it := findItem(t, "partitions", res.Partitions, "orders"); it.Action != "grown" || it.Detail != "from 3 to 6 partitions (3 added)" {
		t.Fatalf("partitions item %+v", it)
	}
	dst := syncAdmin(t, workertest.Plain(env.Clusters.DestinationAddr()))
	if td, err := dst.ListTopics(ctx, "orders"); err != nil || len(td["orders"].Partitions) != 6 {
		t.Fatalf("destination topic: %+v %v, want 6 partitions", td, err)
	}
	env.syncWaitTopic("m1", "orders", service.StateMirroring, 30*time.Second)
	workertest.WaitMirrored(t, env.Env, "orders", 6, 30*time.Second)
	var ev int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE kind = $1 AND topic = 'orders'`,
		service.EventTopicPartitionsAdded).Scan(&ev); err != nil || ev != 1 {
		t.Fatalf("partitions_added events: %d %v", ev, err)
	}
	// Already in step: the next pass does nothing.
	if res := env.syncNow("m1"); len(res.Partitions.Items) != 0 {
		t.Fatalf("second pass: %+v", res.Partitions)
	}
}

// TestSyncAutoAddsNewTopics: a new source topic matching topics.include is
// mirrored without any API call; topics.exclude (default __.*) and
// non-matching topics are not.
func TestSyncAutoAddsNewTopics(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	for _, name := range []string{"auto-a", "other", "__auto-hidden"} {
		if err := env.Clusters.Source.CreateTopic(name, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	env.startSyncNode("i1", workertest.InstanceOpts{})
	env.syncCreateMirror("m1", "", service.SourceInput{}, map[string]string{
		service.CfgTopicsInclude: "auto-.*|__auto-.*", service.CfgMetadataRefreshIntervalMs: "1000"})
	env.syncWaitTopic("m1", "auto-a", service.StateMirroring, 20*time.Second)

	// Created after the mirror: found by a periodic pass.
	if err := env.Clusters.Source.CreateTopic("auto-b", 2, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "auto-b", 2, 10, kgo.NoCompression())
	env.syncWaitTopic("m1", "auto-b", service.StateMirroring, 20*time.Second)
	workertest.WaitMirrored(t, env.Env, "auto-b", 2, 20*time.Second)

	topics, err := repo.TopicsList(context.Background(), env.Pool, "m1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range topics {
		names = append(names, tp.Topic)
	}
	if !slices.Equal(names, []string{"auto-a", "auto-b"}) {
		t.Fatalf("mirror topics %v, want [auto-a auto-b]", names)
	}
	var ev int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE kind = $1 AND mirror = 'm1'`,
		service.EventTopicsAutoAdded).Scan(&ev); err != nil || ev != 2 {
		t.Fatalf("auto_added events: %d %v", ev, err)
	}
	// The periodic passes store their results.
	m, err := env.Svc.GetMirror(context.Background(), "m1")
	if err != nil {
		t.Fatal(err)
	}
	var last service.SyncResult
	if err := json.Unmarshal(m.LastSync, &last); err != nil || last.Mirror != "m1" || last.Instance != "i1" || !last.OK {
		t.Fatalf("last_sync %s (%v)", m.LastSync, err)
	}
}

// TestSyncStopsTopicsDeletedOnSource: a mirrored topic missing on the
// source on two passes in a row is stopped, with an event saying why; the
// other topics go on.
func TestSyncStopsTopicsDeletedOnSource(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	for _, name := range []string{"orders", "keep"} {
		if err := env.Clusters.Source.CreateTopic(name, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 1, 5, kgo.NoCompression())
	env.startSyncNode("i1", workertest.InstanceOpts{})
	env.syncCreateMirror("m1", "orders|keep", service.SourceInput{}, nil)
	env.WaitStates("m1", service.StateMirroring, 20*time.Second)
	workertest.WaitMirrored(t, env.Env, "orders", 1, 20*time.Second)

	src := syncAdmin(t, workertest.Plain(env.Clusters.SourceAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := src.DeleteTopics(ctx, "orders"); err != nil || resp.Error() != nil {
		t.Fatalf("delete source topic: %v %v", err, resp.Error())
	}

	res := env.syncNow("m1")
	mustOK(t, res)
	if it := findItem(t, "deleted_topics", res.DeletedTopics, "orders"); it.Action != "missing" {
		t.Fatalf("first pass: %+v", it)
	}
	if tp, _ := repo.TopicsGet(ctx, env.Pool, "m1", "orders"); tp.DesiredState != service.DesiredMirroring {
		t.Fatalf("after one pass the topic is %s", tp.DesiredState)
	}
	res = env.syncNow("m1")
	mustOK(t, res)
	if it := findItem(t, "deleted_topics", res.DeletedTopics, "orders"); it.Action != "stopped" {
		t.Fatalf("second pass: %+v", it)
	}
	env.syncWaitTopic("m1", "orders", service.StateStopped, 20*time.Second)
	env.syncWaitTopic("m1", "keep", service.StateMirroring, 5*time.Second)
	var msg string
	if err := env.Pool.QueryRow(ctx, `SELECT message FROM events WHERE kind = $1 AND mirror = 'm1' AND topic = 'orders'`,
		service.EventTopicsSourceDeleted).Scan(&msg); err != nil {
		t.Fatalf("source_deleted event: %v", err)
	}
	if !strings.Contains(msg, "deleted on the source cluster") {
		t.Fatalf("event message %q does not say why", msg)
	}
	if tp, _ := repo.TopicsGet(ctx, env.Pool, "m1", "keep"); tp.DesiredState != service.DesiredMirroring {
		t.Fatalf("keep is %s", tp.DesiredState)
	}
}

// TestSyncGroupOffsets: a group's committed source offsets are translated
// and committed on the destination, where a consumer of that group reads
// exactly what it had not consumed. A group active on the destination and
// the partitions of stopped topics are skipped and reported.
func TestSyncGroupOffsets(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	for name, n := range map[string]int32{"orders": 2, "gone": 1} {
		if err := env.Clusters.Source.CreateTopic(name, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 20, kgo.NoCompression())
	workertest.Produce(t, env.Clusters.SourceAddr(), "gone", 1, 5, kgo.NoCompression())
	env.startSyncNode("i1", workertest.InstanceOpts{})
	env.syncCreateMirror("m1", "orders|gone", service.SourceInput{}, nil)
	workertest.WaitMirrored(t, env.Env, "orders", 2, 30*time.Second)
	workertest.WaitMirrored(t, env.Env, "gone", 1, 30*time.Second)
	env.syncWaitCheckpointed("m1", "orders", 10*time.Second)
	ctx := context.Background()
	if _, err := env.Svc.RemoveTopics(ctx, "m1", "gone"); err != nil {
		t.Fatal(err)
	}
	env.syncWaitTopic("m1", "gone", service.StateStopped, 20*time.Second)

	srcConn, dstConn := workertest.Plain(env.Clusters.SourceAddr()), workertest.Plain(env.Clusters.DestinationAddr())
	consumeAndCommit(t, srcConn, "app", "orders", 2, 7, false)
	src, dst := syncAdmin(t, srcConn), syncAdmin(t, dstConn)
	if err := src.CommitAllOffsets(ctx, "app", kadm.OffsetsList{{Topic: "gone", Partition: 0, At: 3, LeaderEpoch: -1}}.Offsets()); err != nil {
		t.Fatal(err)
	}

	// "live" is consumed on the destination right now.
	liveCtx, stopLive := context.WithCancel(ctx)
	live, err := dstConn.NewClient(kgo.ConsumerGroup("live"), kgo.ConsumeTopics("orders"))
	if err != nil {
		t.Fatal(err)
	}
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		for liveCtx.Err() == nil {
			live.PollFetches(liveCtx)
		}
	}()
	t.Cleanup(func() { stopLive(); <-liveDone; live.Close() })
	workertest.WaitFor(t, 20*time.Second, "group live stable on the destination", func() (bool, string) {
		gs, err := dst.ListGroups(ctx)
		return err == nil && gs["live"].State == "Stable", fmt.Sprint(gs, err)
	})
	if err := src.CommitAllOffsets(ctx, "live", kadm.OffsetsList{{Topic: "orders", Partition: 0, At: 2, LeaderEpoch: -1}}.Offsets()); err != nil {
		t.Fatal(err)
	}

	res := env.syncNow("m1")
	mustOK(t, res)
	app := findGroup(t, res.GroupOffsets, "app")
	if app.SyncedPartitions != 2 || app.Committed != 2 || len(app.Skipped) != 1 ||
		app.Skipped[0].Topic != "gone" || !strings.Contains(app.Skipped[0].Reason, "STOPPED") {
		t.Fatalf("group app: %+v", app)
	}
	if g := findGroup(t, res.GroupOffsets, "live"); !strings.Contains(g.SkippedReason, "active on the destination") ||
		g.Committed != 0 {
		t.Fatalf("group live: %+v", g)
	}
	if off, err := dst.FetchOffsets(ctx, "live"); err != nil || len(off) != 0 {
		t.Fatalf("live's destination offsets were touched: %v %v", off, err)
	}
	if off, err := dst.FetchOffsets(ctx, "app"); err != nil {
		t.Fatal(err)
	} else if _, ok := off.Lookup("gone", 0); ok {
		t.Fatalf("a stopped topic's offset was committed: %v", off)
	}

	// A consumer of app on the destination reads exactly what app had not
	// consumed on the source.
	got := consumeToEnd(t, dstConn, "app", "orders", 2)
	for p := int32(0); p < 2; p++ {
		want := workertest.ReadAll(t, env.Clusters.SourceAddr(), "orders", p, true)[7:]
		if len(got[p]) != len(want) {
			t.Fatalf("orders/%d: the destination consumer read %d records, want %d", p, len(got[p]), len(want))
		}
		for i := range want {
			if err := kafkaconn.SameRecord(want[i], got[p][i]); err != nil {
				t.Fatalf("orders/%d record %d: %v", p, i, err)
			}
		}
	}

	// In step: nothing to commit on the next pass.
	res = env.syncNow("m1")
	if app := findGroup(t, res.GroupOffsets, "app"); app.Committed != 0 || app.SyncedPartitions != 2 {
		t.Fatalf("second pass, group app: %+v", app)
	}
}

// TestSyncGroupOffsetsTransactional: with aborted transactions on the
// source, source and destination offsets diverge; the synced offset still
// points at the first record the group had not consumed.
func TestSyncGroupOffsetsTransactional(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("txn", 1, nil); err != nil {
		t.Fatal(err)
	}
	// Source offsets: 0-4 committed, 5 marker, 6-10 aborted, 11 marker,
	// 12-16 committed, 17 marker, then 18-20 plain.
	tx, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.SourceAddr()), kgo.TransactionalID("sync-txn"),
		kgo.DefaultProduceTopic("txn"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for b, commit := range []bool{true, false, true} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			if err := tx.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("b%d-%d", b, i)),
				Value: []byte(fmt.Sprintf("batch %d record %d", b, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	tx.Close()
	workertest.Produce(t, env.Clusters.SourceAddr(), "txn", 1, 3, kgo.NoCompression())

	env.startSyncNode("i1", workertest.InstanceOpts{})
	env.syncCreateMirror("m1", "txn", service.SourceInput{}, nil)
	workertest.WaitMirrored(t, env.Env, "txn", 1, 30*time.Second)
	env.syncWaitCheckpointed("m1", "txn", 10*time.Second)

	srcConn, dstConn := workertest.Plain(env.Clusters.SourceAddr()), workertest.Plain(env.Clusters.DestinationAddr())
	taken := consumeAndCommit(t, srcConn, "app", "txn", 1, 7, true)
	if last := taken[0][6].Offset; last != 13 {
		t.Fatalf("the 7th committed record is at source offset %d, want 13", last)
	}
	res := env.syncNow("m1")
	mustOK(t, res)
	if g := findGroup(t, res.GroupOffsets, "app"); g.Committed != 1 {
		t.Fatalf("group app: %+v", g)
	}
	srcOff, err := syncAdmin(t, srcConn).FetchOffsets(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	dstOff, err := syncAdmin(t, dstConn).FetchOffsets(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := srcOff.Lookup("txn", 0)
	d, _ := dstOff.Lookup("txn", 0)
	if s.At != 14 || d.At != 7 {
		t.Fatalf("committed offsets: source %d (want 14), destination %d (want 7)", s.At, d.At)
	}
	got := consumeToEnd(t, dstConn, "app", "txn", 1)[0]
	want := workertest.ReadAll(t, env.Clusters.SourceAddr(), "txn", 0, true)[7:]
	if len(got) != len(want) || len(want) != 6 {
		t.Fatalf("the destination consumer read %d records, want %d (6)", len(got), len(want))
	}
	for i := range want {
		if err := kafkaconn.SameRecord(want[i], got[i]); err != nil {
			t.Fatalf("record %d (source offset %d): %v", i, want[i].Offset, err)
		}
	}
}

// TestSyncACLs: with an authorizer on both clusters, a source ACL, literal
// or prefixed, on a mirrored topic or a synced group is created on the
// destination and deleted once the source drops it; local destination ACLs
// (a prefixed one too) and kmirror's read-only ACL survive every pass.
func TestSyncACLs(t *testing.T) {
	t.Parallel()
	const mech, user, pass = "SCRAM-SHA-256", "admin", "admin-secret"
	secure := []kfake.Opt{kfake.EnableSASL(), kfake.Superuser(mech, user, pass), kfake.EnableACLs()}
	env := newEngineEnv(t, devcluster.Config{SourceOpts: secure, DestinationOpts: secure})
	for _, name := range []string{"orders", "unmirrored"} {
		if err := env.Clusters.Source.CreateTopic(name, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	sec := kafkaconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: mech, SASLUsername: user, SASLPassword: pass}
	srcConn := kafkaconn.Config{BootstrapServers: []string{env.Clusters.SourceAddr()}, Security: sec}
	dstConn := kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}, Security: sec}
	env.startSyncNode("i1", workertest.InstanceOpts{Dest: dstConn})
	env.syncCreateMirror("m1", "orders", service.SourceInput{SecurityProtocol: sec.Protocol, SASLMechanism: mech,
		SASLUsername: user, SASLPassword: pass}, map[string]string{service.CfgGroupsExclude: "private-.*"})
	env.syncWaitTopic("m1", "orders", service.StateMirroring, 20*time.Second)
	// The pass that starts with the metadata lease must be over before the
	// ACLs exist: under load the lease can come after the partitions'
	// MIRRORING, and that pass then created them before the one checked.
	env.syncNow("m1")

	src, dst := syncAdmin(t, srcConn), syncAdmin(t, dstConn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mustACLs := func(adm *kadm.Client, b *kadm.ACLBuilder) { workertest.MustCreateACLs(t, ctx, adm, b) }
	aliceTopic := workertest.ReadACL(kadm.NewACLs().Topics("orders"), kadm.ACLPatternLiteral, "User:alice")
	mustACLs(src, aliceTopic)
	mustACLs(src, workertest.ReadACL(kadm.NewACLs().Groups("app"), kadm.ACLPatternLiteral, "User:alice"))
	mustACLs(src, workertest.ReadACL(kadm.NewACLs().Groups("private-app"), kadm.ACLPatternLiteral, "User:alice"))
	mustACLs(src, workertest.ReadACL(kadm.NewACLs().Topics("unmirrored"), kadm.ACLPatternLiteral, "User:carol"))
	daveOrd := workertest.ReadACL(kadm.NewACLs().Topics("ord"), kadm.ACLPatternPrefixed, "User:dave")
	mustACLs(src, daveOrd)
	// Prefixes that cover no mirrored topic, or a group the filters exclude.
	mustACLs(src, workertest.ReadACL(kadm.NewACLs().Topics("unm"), kadm.ACLPatternPrefixed, "User:dave"))
	mustACLs(src, workertest.ReadACL(kadm.NewACLs().Groups("private-"), kadm.ACLPatternPrefixed, "User:dave"))
	mustACLs(src, workertest.ReadACL(kadm.NewACLs().Groups("app-"), kadm.ACLPatternPrefixed, "User:dave"))
	// The source's own read-only ACL shape (it may itself be a mirror).
	mustACLs(src, readOnlyACL("orders"))
	mustACLs(dst, workertest.ReadACL(kadm.NewACLs().Topics("orders"), kadm.ACLPatternLiteral, "User:bob"))
	// A local prefixed ACL identical to nothing on the source.
	mustACLs(dst, workertest.ReadACL(kadm.NewACLs().Topics("or"), kadm.ACLPatternPrefixed, "User:erin"))

	const (
		aliceOrders = "TOPIC:orders:LITERAL:User:alice:*:READ:ALLOW"
		aliceApp    = "GROUP:app:LITERAL:User:alice:*:READ:ALLOW"
		daveAppPfx  = "GROUP:app-:PREFIXED:User:dave:*:READ:ALLOW"
		bobOrders   = "TOPIC:orders:LITERAL:User:bob:*:READ:ALLOW"
		daveOrdPfx  = "TOPIC:ord:PREFIXED:User:dave:*:READ:ALLOW"
		erinOrPfx   = "TOPIC:or:PREFIXED:User:erin:*:READ:ALLOW"
		readOnly    = "TOPIC:orders:LITERAL:User:*:*:WRITE:DENY"
	)
	destACLs := func() []string {
		t.Helper()
		return workertest.ACLStrings(t, ctx, mustClient(t, dstConn))
	}

	res := env.syncNow("m1")
	mustOK(t, res)
	var created []string
	for _, it := range res.ACLs.Items {
		if it.Action == "created" {
			created = append(created, it.Name)
		}
	}
	if want := sorted(aliceApp, daveAppPfx, aliceOrders, daveOrdPfx); !slices.Equal(created, want) {
		t.Fatalf("created ACLs %v, want %v; items %+v", created, want, res.ACLs.Items)
	}
	if got, want := destACLs(), sorted(append([]string{aliceApp, daveAppPfx, erinOrPfx, daveOrdPfx, readOnly, aliceOrders, bobOrders},
		workertest.InternalTopicsACLStrings...)...); !slices.Equal(got, want) {
		t.Fatalf("destination ACLs %v, want %v", got, want)
	}

	// Dropped on the source: the copies go, nothing else does.
	if _, err := src.DeleteACLs(ctx, aliceTopic); err != nil {
		t.Fatal(err)
	}
	if _, err := src.DeleteACLs(ctx, daveOrd); err != nil {
		t.Fatal(err)
	}
	if _, err := src.DeleteACLs(ctx, readOnlyACL("orders")); err != nil {
		t.Fatal(err)
	}
	res = env.syncNow("m1")
	mustOK(t, res)
	if it := findItem(t, "acls", res.ACLs, aliceOrders); it.Action != "deleted" || len(res.ACLs.Items) != 2 {
		t.Fatalf("acls items %+v", res.ACLs.Items)
	}
	if it := findItem(t, "acls", res.ACLs, daveOrdPfx); it.Action != "deleted" {
		t.Fatalf("acls items %+v", res.ACLs.Items)
	}
	kept := sorted(append([]string{aliceApp, daveAppPfx, erinOrPfx, readOnly, bobOrders}, workertest.InternalTopicsACLStrings...)...)
	if got := destACLs(); !slices.Equal(got, kept) {
		t.Fatalf("destination ACLs %v, want %v", got, kept)
	}
	res = env.syncNow("m1")
	mustOK(t, res)
	if len(res.ACLs.Items) != 0 {
		t.Fatalf("third pass changed ACLs: %+v", res.ACLs.Items)
	}
	if got := destACLs(); !slices.Equal(got, kept) {
		t.Fatalf("destination ACLs %v, want %v", got, kept)
	}
	tracked, err := repo.SyncedACLsList(ctx, env.Pool, "m1")
	if err != nil || len(tracked) != 2 || tracked[0].ResourceType != "GROUP" || tracked[1].ResourceType != "GROUP" {
		t.Fatalf("tracked ACLs %+v %v", tracked, err)
	}
	// Every change of the set was queued for __mirror_state, the last one
	// being the current set.
	rows, err := repo.OutboxList(ctx, env.Pool, repo.OutboxListParams{Mirror: "m1", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var last service.SyncedACLsRecord
	for _, r := range rows {
		if r.Key == service.SyncedACLsKey("m1") {
			if err := json.Unmarshal(r.Value, &last); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(last.ACLs) != 2 || last.ACLs[0].PatternType == last.ACLs[1].PatternType {
		t.Fatalf("last synced-ACL record %+v", last)
	}
}

func sorted(s ...string) []string { slices.Sort(s); return s }

// readOnlyACL is the shape of kmirror's read-only ACL on a mirrored topic.
func readOnlyACL(topic string) *kadm.ACLBuilder {
	return kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:*").DenyHosts("*").Operations(kadm.OpWrite)
}

func mustClient(t *testing.T, conn kafkaconn.Config) *kgo.Client {
	t.Helper()
	cl, err := conn.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSyncSourceUnreachable: a pass that cannot reach the source records
// the error and changes nothing (no topic counts as deleted, no config is
// reset); the next pass after the source is back recovers.
func TestSyncSourceUnreachable(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	env.startSyncNode("i1", workertest.InstanceOpts{})
	env.syncCreateMirror("m1", "orders", service.SourceInput{}, nil)
	env.syncWaitTopic("m1", "orders", service.StateMirroring, 20*time.Second)
	src := syncAdmin(t, workertest.Plain(env.Clusters.SourceAddr()))
	dst := syncAdmin(t, workertest.Plain(env.Clusters.DestinationAddr()))
	alterConfigs(t, src, "orders", set("retention.ms", "3600000"))
	mustOK(t, env.syncNow("m1"))

	ctx := context.Background()
	patch := func(bootstrap string) {
		t.Helper()
		if _, err := env.Svc.UpdateMirror(ctx, "m1", service.MirrorPatch{Source: &service.SourcePatch{BootstrapServers: &bootstrap}},
			service.WriteOpts{SkipConnectivityCheck: true}); err != nil {
			t.Fatal(err)
		}
	}
	patch("127.0.0.1:1")
	alterConfigs(t, src, "orders", set("retention.ms", "7200000"))
	for pass := 1; pass <= 2; pass++ {
		res := env.syncNow("m1")
		if res.OK || res.DeletedTopics.OK || res.TopicConfigs.OK || res.Partitions.OK || res.GroupOffsets.OK || res.ACLs.OK {
			t.Fatalf("pass %d against an unreachable source is OK: %+v", pass, res)
		}
		if !strings.Contains(res.DeletedTopics.Error, "127.0.0.1:1") {
			t.Fatalf("pass %d: error %q does not name the source", pass, res.DeletedTopics.Error)
		}
		if len(res.DeletedTopics.Items)+len(res.TopicConfigs.Items)+len(res.ACLs.Items) != 0 {
			t.Fatalf("pass %d acted: %+v", pass, res)
		}
	}
	if got := dynamicTopicConfigs(t, dst, "orders"); got["retention.ms"] != "3600000" {
		t.Fatalf("destination configs changed while the source was unreachable: %v", got)
	}
	var missing int
	if err := env.Pool.QueryRow(ctx, `SELECT source_missing_passes FROM mirror_topics WHERE mirror = 'm1' AND topic = 'orders'`).
		Scan(&missing); err != nil || missing != 0 {
		t.Fatalf("source_missing_passes %d %v", missing, err)
	}
	if tp, _ := repo.TopicsGet(ctx, env.Pool, "m1", "orders"); tp.DesiredState != service.DesiredMirroring {
		t.Fatalf("orders is %s", tp.DesiredState)
	}

	patch(env.Clusters.SourceAddr())
	res := env.syncNow("m1")
	mustOK(t, res)
	if got := dynamicTopicConfigs(t, dst, "orders"); got["retention.ms"] != "7200000" {
		t.Fatalf("destination configs after recovery: %v", got)
	}
}

// TestSyncNowOverHTTP: POST /v1/mirrors/{mirror}:sync runs a pass at once
// and returns its result, which GET /v1/mirrors/{mirror} then shows.
func TestSyncNowOverHTTP(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	env.startSyncNode("i1", workertest.InstanceOpts{})
	env.syncCreateMirror("m.1", "orders", service.SourceInput{}, nil)
	h, err := api.NewHandler(api.Config{Service: env.Svc, Pool: env.Pool, Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	before := time.Now().UTC()
	resp, err := http.Post(srv.URL+"/v1/mirrors/m.1:sync", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res service.SyncResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, decode %v", resp.StatusCode, err)
	}
	if res.Mirror != "m.1" || res.Trigger != service.SyncTriggerRequest || res.Instance != "i1" || !res.OK ||
		res.StartedAt.Before(before.Add(-time.Second)) || res.FinishedAt.Before(res.StartedAt) {
		t.Fatalf("result %+v", res)
	}

	get, err := http.Get(srv.URL + "/v1/mirrors/m.1")
	if err != nil {
		t.Fatal(err)
	}
	defer get.Body.Close()
	var m api.Mirror
	if err := json.NewDecoder(get.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.LastSync == nil || m.LastSync.Trigger != service.SyncTriggerRequest || !m.LastSync.StartedAt.Equal(res.StartedAt) {
		t.Fatalf("last_sync %v, want the pass %+v", m.LastSync, res)
	}
}

package metadatasync_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// The fan-in tests mirror topic orders and group billing of two sources,
// east (the env's source) and west (a second kfake cluster), into one
// destination, by mirrors east and west with topic.name.prefix east. and
// west.: the destination holds east.orders and west.orders side by side.
// They run a sync-only instance (startSyncOnlyNode) and set up themselves
// what the data plane would have copied, so they test the sync alone.

// startSecondSource starts another one-broker source cluster, closed at
// cleanup, and returns its address.
func startSecondSource(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.ClusterID("kmirror-test-west")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()[0]
}

// awaitedPartitions stands for the engine's producer: it records which
// destination topics the sync waited for, and at what partition count.
type awaitedPartitions struct {
	mu    sync.Mutex
	calls []string
}

func (a *awaitedPartitions) AwaitDestinationPartitions(_ context.Context, topic string, n int32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, fmt.Sprintf("%s/%d", topic, n))
	return nil
}

func (a *awaitedPartitions) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

// restoreMirrored makes a mirror topic's partitions look mirrored up to
// source offset srcNext, as a data plane would leave them: MIRRORING, with
// the checkpoint and an offset map of one run from source offset 0 to
// destination offset dstStart (records the destination held before).
func (env *engineEnv) restoreMirrored(mirror, topic string, partitions int32, srcNext, dstStart int64) {
	t := env.T
	t.Helper()
	ctx := context.Background()
	for p := int32(0); p < partitions; p++ {
		dstNext, lastSrc, lastDst := dstStart+srcNext, srcNext-1, dstStart+srcNext-1
		n, err := repo.PartitionsRestore(ctx, env.Pool, repo.PartitionsRestoreParams{Mirror: mirror, Topic: topic, Partition: p,
			State: service.StateMirroring, SrcNext: &srcNext, DstNext: &dstNext, LastMirroredSrc: &lastSrc, LastMirroredDst: &lastDst})
		if err != nil || n != 1 {
			t.Fatalf("restore %s/%s/%d: %d rows, %v", mirror, topic, p, n, err)
		}
		if err := repo.OffsetRunsRestore(ctx, env.Pool, repo.PartitionID{Mirror: mirror, Topic: topic, Partition: p},
			[]repo.OffsetRun{{SrcStart: 0, DstStart: dstStart, Count: srcNext}}); err != nil {
			t.Fatal(err)
		}
	}
}

// commitGroup commits a group's offsets on a topic, as a consumer that
// has left would have.
func commitGroup(t *testing.T, adm *kadm.Client, group, topic string, at map[int32]int64) {
	t.Helper()
	var l kadm.OffsetsList
	for p, o := range at {
		l = append(l, kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := adm.CommitAllOffsets(ctx, group, l.Offsets()); err != nil {
		t.Fatalf("commit %s's offsets on %s: %v", group, topic, err)
	}
}

// groupOffsets lists a group's committed offsets as sorted
// "topic/partition=offset" strings.
func groupOffsets(t *testing.T, adm *kadm.Client, group string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil
	} else if err != nil {
		t.Fatalf("fetch %s's offsets: %v", group, err)
	}
	var out []string
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("%s's offset of %s/%d: %v", group, o.Topic, o.Partition, o.Err)
		}
		out = append(out, fmt.Sprintf("%s/%d=%d", o.Topic, o.Partition, o.At))
	})
	slices.Sort(out)
	return out
}

// partitionCounts maps topics to their partition counts on a cluster, as
// a new client sees them (a client's cached metadata may be older).
func partitionCounts(t *testing.T, conn kafkaconn.Config, topics ...string) map[string]int {
	t.Helper()
	adm, err := conn.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, name := range topics {
		out[name] = len(td[name].Partitions)
	}
	return out
}

// TestSyncFanInTopicsAndGroups: two mirrors from two sources into one
// destination, with topic prefixes, each sync their topic's configs,
// partition growth and group offsets onto their own prefixed topic, and
// west's, with group.name.prefix, into its prefixed group. Neither pass
// touches the other mirror's topic and offsets, nor a local topic and group
// named as the sources'. Auto-add names the topic it adds with the prefix.
// A changed group.name.prefix moves the offsets to the new group and
// leaves the old one alone.
func TestSyncFanInTopicsAndGroups(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	_, westAddr := startSecondSource(t)
	eastAddr := env.Clusters.SourceAddr()
	east, west := syncAdmin(t, workertest.Plain(eastAddr)), syncAdmin(t, workertest.Plain(westAddr))
	dst := syncAdmin(t, workertest.Plain(env.Clusters.DestinationAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, src := range []*kadm.Client{east, west} {
		if resp, err := src.CreateTopics(ctx, 2, 1, nil, "orders"); err != nil || resp.Error() != nil {
			t.Fatalf("create orders on a source: %v %v", err, resp.Error())
		}
	}
	workertest.Produce(t, eastAddr, "orders", 2, 20, kgo.NoCompression())
	workertest.Produce(t, westAddr, "orders", 2, 20, kgo.NoCompression())
	// What the data plane would have copied: east.orders as the source
	// was; west.orders after 5 records it held before, so west's offsets
	// translate to others (its offset map says so). orders is local.
	env.CreateDestinationTopics(2, "east.orders", "west.orders", "orders")
	dstAddr := env.Clusters.DestinationAddr()
	workertest.Produce(t, dstAddr, "east.orders", 2, 20, kgo.NoCompression())
	workertest.Produce(t, dstAddr, "west.orders", 2, 25, kgo.NoCompression())
	workertest.Produce(t, dstAddr, "orders", 2, 3, kgo.NoCompression())
	alterConfigs(t, dst, "orders", set("retention.ms", "86400000"))
	commitGroup(t, dst, "billing", "orders", map[int32]int64{0: 1})
	commitGroup(t, east, "billing", "orders", map[int32]int64{0: 7, 1: 3})
	commitGroup(t, west, "billing", "orders", map[int32]int64{0: 7, 1: 9})

	env.syncCreateMirror("east", "orders", service.SourceInput{BootstrapServers: eastAddr},
		map[string]string{service.CfgTopicNamePrefix: "east."})
	env.syncCreateMirror("west", "", service.SourceInput{BootstrapServers: westAddr}, map[string]string{
		service.CfgTopicNamePrefix: "west.", service.CfgGroupNamePrefix: "west.", service.CfgTopicsInclude: "orders"})
	awaited := &awaitedPartitions{}
	env.startSyncOnlyNode("i1", kafkaconn.Config{}, awaited)

	// west's first pass, on its lease's start, adds orders as west.orders.
	var added service.SyncItem
	workertest.WaitFor(t, 20*time.Second, "west's first pass to add orders", func() (bool, string) {
		m, err := env.Svc.GetMirror(ctx, "west")
		if err != nil {
			t.Fatal(err)
		}
		var res service.SyncResult
		if len(m.LastSync) == 0 || json.Unmarshal(m.LastSync, &res) != nil || len(res.NewTopics.Items) == 0 {
			return false, string(m.LastSync)
		}
		added = res.NewTopics.Items[0]
		return true, ""
	})
	if added.Name != "orders" || added.DestinationTopic != "west.orders" || added.Action != "added" {
		t.Fatalf("new_topics item %+v, want orders added as west.orders", added)
	}
	if tp, err := repo.TopicsGet(ctx, env.Pool, "west", "orders"); err != nil || tp.DestTopic != "west.orders" {
		t.Fatalf("west's topic row %+v %v, want destination west.orders", tp, err)
	}
	// east's first pass is over too before what it would sync is set up:
	// a mirror's passes run one at a time.
	mustOK(t, env.syncNow("east"))
	env.restoreMirrored("east", "orders", 2, 20, 0)
	env.restoreMirrored("west", "orders", 2, 20, 5)
	alterConfigs(t, east, "orders", set("retention.ms", "3600000"))
	alterConfigs(t, west, "orders", set("retention.ms", "7200000"))

	// east's pass: its prefixed topic and billing's offsets on it.
	res := env.syncNow("east")
	mustOK(t, res)
	if it := findItem(t, "topic_configs", res.TopicConfigs, "orders"); it.Action != "updated" ||
		it.DestinationTopic != "east.orders" || it.Detail != "retention.ms=3600000" {
		t.Fatalf("east's topic_configs item %+v", it)
	}
	if b, _ := json.Marshal(res.TopicConfigs.Items[0]); !strings.Contains(string(b), `"destination_topic":"east.orders"`) {
		t.Fatalf("the item's JSON does not name the destination topic: %s", b)
	}
	if g := findGroup(t, res.GroupOffsets, "billing"); g.DestinationGroup != "" || g.Committed != 2 || g.SyncedPartitions != 2 ||
		len(g.Skipped)+len(g.Clamped) != 0 || g.Error != "" {
		t.Fatalf("east's group billing: %+v", g)
	}
	wantCfgs := map[string]map[string]string{
		"east.orders": {"retention.ms": "3600000"},
		"west.orders": {},
		"orders":      {"retention.ms": "86400000"},
	}
	checkConfigs := func(when string) {
		t.Helper()
		for topic, want := range wantCfgs {
			if got := dynamicTopicConfigs(t, dst, topic); !maps.Equal(got, want) {
				t.Fatalf("%s: destination configs of %s %v, want %v", when, topic, got, want)
			}
		}
	}
	wantGroups := map[string][]string{
		"billing":      {"east.orders/0=7", "east.orders/1=3", "orders/0=1"},
		"west.billing": nil,
		"east.billing": nil,
	}
	checkGroups := func(when string) {
		t.Helper()
		for g, want := range wantGroups {
			if got := groupOffsets(t, dst, g); !slices.Equal(got, want) {
				t.Fatalf("%s: destination group %s has %v, want %v", when, g, got, want)
			}
		}
	}
	checkConfigs("after east's pass")
	checkGroups("after east's pass")

	// west's pass: its own topic, and billing's offsets translated by its
	// offset map (7 → 12, 9 → 14) into group west.billing.
	res = env.syncNow("west")
	mustOK(t, res)
	if it := findItem(t, "topic_configs", res.TopicConfigs, "orders"); it.Action != "updated" || it.DestinationTopic != "west.orders" {
		t.Fatalf("west's topic_configs item %+v", it)
	}
	if g := findGroup(t, res.GroupOffsets, "billing"); g.DestinationGroup != "west.billing" || g.Committed != 2 || g.Error != "" {
		t.Fatalf("west's group billing: %+v", g)
	}
	wantCfgs["west.orders"] = map[string]string{"retention.ms": "7200000"}
	wantGroups["west.billing"] = []string{"west.orders/0=12", "west.orders/1=14"}
	checkConfigs("after west's pass")
	checkGroups("after west's pass")

	// east's source grows orders to 4 partitions: east.orders grows, the
	// producer is told its name, and nothing else grows.
	if resp, err := east.CreatePartitions(ctx, 2, "orders"); err != nil || resp.Error() != nil {
		t.Fatalf("grow east's orders: %v %v", err, resp.Error())
	}
	res = env.syncNow("east")
	mustOK(t, res)
	if it := findItem(t, "partitions", res.Partitions, "orders"); it.Action != "grown" || it.DestinationTopic != "east.orders" ||
		it.Detail != "from 2 to 4 partitions (2 added)" {
		t.Fatalf("east's partitions item %+v", it)
	}
	if got, want := partitionCounts(t, workertest.Plain(dstAddr), "east.orders", "west.orders", "orders"),
		map[string]int{"east.orders": 4, "west.orders": 2, "orders": 2}; !maps.Equal(got, want) {
		t.Fatalf("destination partition counts %v, want %v", got, want)
	}
	if got := awaited.list(); !slices.Equal(got, []string{"east.orders/4"}) {
		t.Fatalf("the producer was asked to await %v, want [east.orders/4]", got)
	}
	if tp, err := repo.TopicsGet(ctx, env.Pool, "east", "orders"); err != nil || tp.Partitions != 4 {
		t.Fatalf("east's orders row: %+v %v", tp, err)
	}
	res = env.syncNow("west")
	mustOK(t, res)
	if len(res.Partitions.Items)+len(res.TopicConfigs.Items) != 0 {
		t.Fatalf("west's pass acted after east's source grew: %+v %+v", res.Partitions, res.TopicConfigs)
	}
	if g := findGroup(t, res.GroupOffsets, "billing"); g.Committed != 0 || g.SyncedPartitions != 2 {
		t.Fatalf("west's group billing, in step: %+v", g)
	}
	checkConfigs("after both grew")
	checkGroups("after both grew")

	// east takes a group prefix: billing's offsets go to east.billing; the
	// old destination group keeps what it has.
	prefix := "east."
	if _, err := env.Svc.UpdateMirror(ctx, "east", service.MirrorPatch{Config: map[string]*string{service.CfgGroupNamePrefix: &prefix}},
		service.WriteOpts{SkipConnectivityCheck: true}); err != nil {
		t.Fatal(err)
	}
	res = env.syncNow("east")
	mustOK(t, res)
	if g := findGroup(t, res.GroupOffsets, "billing"); g.DestinationGroup != "east.billing" || g.Committed != 2 {
		t.Fatalf("east's group billing after the prefix: %+v", g)
	}
	wantGroups["east.billing"] = []string{"east.orders/0=7", "east.orders/1=3"}
	checkConfigs("after east's group prefix")
	checkGroups("after east's group prefix")
}

// TestSyncFanInACLs: with an authorizer everywhere, each mirror copies its
// source's ACLs under its destination names (LITERAL orders → east.orders,
// PREFIXED ord → east.ord, a group by group.name.prefix when set, LITERAL *
// unchanged) and records them so; a LITERAL * on topics is not copied.
// Dropping an ACL on one source deletes that mirror's copy only: the other
// mirror's copies, kmirror's read-only ACLs and local ACLs stay.
func TestSyncFanInACLs(t *testing.T) {
	t.Parallel()
	const mech, user, pass = "SCRAM-SHA-256", "admin", "admin-secret"
	secure := []kfake.Opt{kfake.EnableSASL(), kfake.Superuser(mech, user, pass), kfake.EnableACLs()}
	env := newEngineEnv(t, devcluster.Config{SourceOpts: secure, DestinationOpts: secure})
	westCluster, westAddr := startSecondSource(t, secure...)
	for _, c := range []*kfake.Cluster{env.Clusters.Source, westCluster} {
		if err := c.CreateTopic("orders", 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	sec := kafkaconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: mech, SASLUsername: user, SASLPassword: pass}
	conn := func(addr string) kafkaconn.Config {
		return kafkaconn.Config{BootstrapServers: []string{addr}, Security: sec}
	}
	dstConn := conn(env.Clusters.DestinationAddr())
	srcInput := func(addr string) service.SourceInput {
		return service.SourceInput{BootstrapServers: addr, SecurityProtocol: sec.Protocol, SASLMechanism: mech,
			SASLUsername: user, SASLPassword: pass}
	}
	env.syncCreateMirror("east", "orders", srcInput(env.Clusters.SourceAddr()), map[string]string{
		service.CfgTopicNamePrefix: "east.", service.CfgGroupNamePrefix: "east."})
	env.syncCreateMirror("west", "orders", srcInput(westAddr), map[string]string{service.CfgTopicNamePrefix: "west."})
	env.startSyncOnlyNode("i1", dstConn, nil)
	// The passes that start with the metadata leases are over before the
	// ACLs exist.
	env.syncNow("east")
	env.syncNow("west")

	east, west, dst := syncAdmin(t, conn(env.Clusters.SourceAddr())), syncAdmin(t, conn(westAddr)), syncAdmin(t, dstConn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mustACLs := func(adm *kadm.Client, b *kadm.ACLBuilder) { workertest.MustCreateACLs(t, ctx, adm, b) }
	aliceOrders := workertest.ReadACL(kadm.NewACLs().Topics("orders"), kadm.ACLPatternLiteral, "User:alice")
	daveOrd := workertest.ReadACL(kadm.NewACLs().Topics("ord"), kadm.ACLPatternPrefixed, "User:dave")
	aliceBilling := workertest.ReadACL(kadm.NewACLs().Groups("billing"), kadm.ACLPatternLiteral, "User:alice")
	for _, src := range []*kadm.Client{east, west} {
		mustACLs(src, aliceOrders)
		mustACLs(src, daveOrd)
		mustACLs(src, aliceBilling)
		mustACLs(src, workertest.ReadACL(kadm.NewACLs().Topics("*"), kadm.ACLPatternLiteral, "User:carol"))
	}
	mustACLs(east, workertest.ReadACL(kadm.NewACLs().Groups("*"), kadm.ACLPatternLiteral, "User:erin"))
	// kmirror's read-only ACLs, as the data plane makes them, and a local
	// ACL on a destination topic named as the sources'.
	mustACLs(dst, readOnlyACL("east.orders"))
	mustACLs(dst, readOnlyACL("west.orders"))
	mustACLs(dst, workertest.ReadACL(kadm.NewACLs().Topics("orders"), kadm.ACLPatternLiteral, "User:bob"))

	const (
		eastAliceOrders  = "TOPIC:east.orders:LITERAL:User:alice:*:READ:ALLOW"
		eastDaveOrd      = "TOPIC:east.ord:PREFIXED:User:dave:*:READ:ALLOW"
		eastAliceBilling = "GROUP:east.billing:LITERAL:User:alice:*:READ:ALLOW"
		erinAllGroups    = "GROUP:*:LITERAL:User:erin:*:READ:ALLOW"
		westAliceOrders  = "TOPIC:west.orders:LITERAL:User:alice:*:READ:ALLOW"
		westDaveOrd      = "TOPIC:west.ord:PREFIXED:User:dave:*:READ:ALLOW"
		westAliceBilling = "GROUP:billing:LITERAL:User:alice:*:READ:ALLOW"
		eastReadOnly     = "TOPIC:east.orders:LITERAL:User:*:*:WRITE:DENY"
		westReadOnly     = "TOPIC:west.orders:LITERAL:User:*:*:WRITE:DENY"
		bobOrders        = "TOPIC:orders:LITERAL:User:bob:*:READ:ALLOW"
	)
	created := func(res service.SyncResult) map[string]string {
		out := map[string]string{}
		for _, it := range res.ACLs.Items {
			if it.Action == "created" {
				out[it.Name] = it.Detail
			}
		}
		return out
	}
	destACLs := func() []string {
		t.Helper()
		return workertest.ACLStrings(t, ctx, mustClient(t, dstConn))
	}
	tracked := func(mirror string) []string {
		t.Helper()
		rows, err := repo.SyncedACLsList(ctx, env.Pool, mirror)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, strings.Join([]string{r.ResourceType, r.ResourceName, r.PatternType, r.Principal, r.Host,
				r.Operation, r.Permission}, ":"))
		}
		slices.Sort(out)
		return out
	}

	res := env.syncNow("east")
	mustOK(t, res)
	wantCreated := map[string]string{
		eastAliceOrders:  "copies the source's TOPIC:orders:LITERAL:User:alice:*:READ:ALLOW",
		eastDaveOrd:      "copies the source's TOPIC:ord:PREFIXED:User:dave:*:READ:ALLOW",
		eastAliceBilling: "copies the source's GROUP:billing:LITERAL:User:alice:*:READ:ALLOW",
		erinAllGroups:    "",
	}
	if got := created(res); !maps.Equal(got, wantCreated) {
		t.Fatalf("east created %v, want %v; items %+v", got, wantCreated, res.ACLs.Items)
	}
	eastOwn := sorted(eastAliceOrders, eastDaveOrd, eastAliceBilling, erinAllGroups)
	if got := tracked("east"); !slices.Equal(got, eastOwn) {
		t.Fatalf("east's synced ACLs %v, want %v", got, eastOwn)
	}
	local := []string{eastReadOnly, westReadOnly, bobOrders}
	if got, want := destACLs(), sorted(append(slices.Clone(local), eastOwn...)...); !slices.Equal(got, want) {
		t.Fatalf("destination ACLs after east's pass %v, want %v", got, want)
	}

	res = env.syncNow("west")
	mustOK(t, res)
	westOwn := sorted(westAliceOrders, westDaveOrd, westAliceBilling)
	if got := slices.Sorted(maps.Keys(created(res))); !slices.Equal(got, westOwn) {
		t.Fatalf("west created %v, want %v; items %+v", got, westOwn, res.ACLs.Items)
	}
	if got := tracked("west"); !slices.Equal(got, westOwn) {
		t.Fatalf("west's synced ACLs %v, want %v", got, westOwn)
	}
	all := sorted(append(append(slices.Clone(local), eastOwn...), westOwn...)...)
	if got := destACLs(); !slices.Equal(got, all) {
		t.Fatalf("destination ACLs after west's pass %v, want %v", got, all)
	}

	// east's source drops alice's and dave's topic ACLs: east's copies go,
	// west's stay; west's next pass has nothing to do.
	for _, b := range []*kadm.ACLBuilder{aliceOrders, daveOrd} {
		if _, err := east.DeleteACLs(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	res = env.syncNow("east")
	mustOK(t, res)
	if len(res.ACLs.Items) != 2 || findItem(t, "acls", res.ACLs, eastAliceOrders).Action != "deleted" ||
		findItem(t, "acls", res.ACLs, eastDaveOrd).Action != "deleted" {
		t.Fatalf("east's acls items %+v", res.ACLs.Items)
	}
	eastOwn = sorted(eastAliceBilling, erinAllGroups)
	all = sorted(append(append(slices.Clone(local), eastOwn...), westOwn...)...)
	if got := destACLs(); !slices.Equal(got, all) {
		t.Fatalf("destination ACLs after east's source dropped two %v, want %v", got, all)
	}
	res = env.syncNow("west")
	mustOK(t, res)
	if len(res.ACLs.Items) != 0 {
		t.Fatalf("west's pass changed ACLs: %+v", res.ACLs.Items)
	}

	// west's source drops billing's: west's GROUP billing copy goes, east's
	// east.billing stays.
	if _, err := west.DeleteACLs(ctx, aliceBilling); err != nil {
		t.Fatal(err)
	}
	res = env.syncNow("west")
	mustOK(t, res)
	if len(res.ACLs.Items) != 1 || findItem(t, "acls", res.ACLs, westAliceBilling).Action != "deleted" {
		t.Fatalf("west's acls items %+v", res.ACLs.Items)
	}
	westOwn = sorted(westAliceOrders, westDaveOrd)
	all = sorted(append(append(slices.Clone(local), eastOwn...), westOwn...)...)
	if got := destACLs(); !slices.Equal(got, all) {
		t.Fatalf("destination ACLs after west's source dropped one %v, want %v", got, all)
	}
	res = env.syncNow("east")
	mustOK(t, res)
	if len(res.ACLs.Items) != 0 {
		t.Fatalf("east's pass changed ACLs: %+v", res.ACLs.Items)
	}
	if got := tracked("east"); !slices.Equal(got, eastOwn) {
		t.Fatalf("east's synced ACLs %v, want %v", got, eastOwn)
	}
}

// TestSyncStoppedTopicLeftToItsNewWriter: a mirror's stopped topic whose
// destination topic another mirror now writes is that mirror's to
// configure: the stopped one's passes skip it and say who writes it.
func TestSyncStoppedTopicLeftToItsNewWriter(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	westCluster, westAddr := startSecondSource(t)
	for _, c := range []*kfake.Cluster{env.Clusters.Source, westCluster} {
		if err := c.CreateTopic("orders", 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	env.CreateDestinationTopics(1, "orders")
	ctx := context.Background()
	env.syncCreateMirror("old", "orders", service.SourceInput{}, nil)
	if _, err := env.Svc.RemoveTopics(ctx, "old", "orders"); err != nil {
		t.Fatal(err)
	}
	env.syncCreateMirror("new", "orders", service.SourceInput{BootstrapServers: westAddr}, nil)
	alterConfigs(t, syncAdmin(t, workertest.Plain(env.Clusters.SourceAddr())), "orders", set("retention.ms", "1000000"))
	alterConfigs(t, syncAdmin(t, workertest.Plain(westAddr)), "orders", set("retention.ms", "2000000"))
	env.startSyncOnlyNode("i1", kafkaconn.Config{}, nil)
	dst := syncAdmin(t, workertest.Plain(env.Clusters.DestinationAddr()))

	mustOK(t, env.syncNow("new"))
	want := map[string]string{"retention.ms": "2000000"}
	if got := dynamicTopicConfigs(t, dst, "orders"); !maps.Equal(got, want) {
		t.Fatalf("destination configs after the writer's pass %v, want %v", got, want)
	}
	res := env.syncNow("old")
	mustOK(t, res)
	if it := findItem(t, "topic_configs", res.TopicConfigs, "orders"); it.Action != "skipped" ||
		!strings.Contains(it.Detail, "mirror new writes its destination topic orders") {
		t.Fatalf("the stopped mirror's topic_configs item %+v", it)
	}
	if got := dynamicTopicConfigs(t, dst, "orders"); !maps.Equal(got, want) {
		t.Fatalf("destination configs after the stopped mirror's pass %v, want %v", got, want)
	}
}

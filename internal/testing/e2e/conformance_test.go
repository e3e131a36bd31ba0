package e2e

import (
	"context"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
)

// TestConformance runs kmirror's end-to-end scenarios against a source and
// a destination cluster: two kfake clusters with SASL/SCRAM in this
// process by default, or an operator's own, named by KMIRROR_CONFORMANCE_*
// variables (conformance_clusters_test.go, docs/conformance.md). Each
// scenario makes its topics and groups under a prefix unique to the run,
// runs its own kmirror server on its own database, checks the copy record
// by record, and deletes the topics it made.
//
//	go test ./internal/testing/e2e -run TestConformance -v
func TestConformance(t *testing.T) {
	c := conformanceClusters(t)
	for _, sc := range conformanceScenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sc.run(t, c)
		})
	}
}

// conformanceScenario is one scenario; needs says what of Kafka it uses
// (docs/conformance.md has the table).
type conformanceScenario struct {
	name  string
	needs string
	run   func(*testing.T, *conformance)
}

var conformanceScenarios = []conformanceScenario{
	{"fidelity", "produce v3+ (record batches v2); idempotent and transactional producers; every codec the cluster accepts", conformFidelity},
	{"pause-resume", "ListOffsets", conformPauseResume},
	{"failover", "ACLs when the destination has an authorizer (read-only enforcement)", conformFailover},
	{"restart-realign", "DeleteTopics and CreateTopics on the destination (recreate)", conformRestart},
	{"group-offsets", "OffsetCommit and OffsetFetch; ListGroups and DescribeGroups", conformGroupOffsets},
	{"config-sync", "DescribeConfigs, IncrementalAlterConfigs, CreatePartitions", conformConfigSync},
	{"crash", "transactions on the source (aborted ones are not copied)", conformCrash},
	{"failback", "kmirror's __mirror_state on both clusters; every scenario above", conformFailback},
}

// produceRecords writes n records to each partition of topic, numbered from
// from (testRecord), with the producer's options, and returns the next
// number.
func produceRecords(t testing.TB, cl kafkaconn.Config, topic string, partitions int32, from, n int64, opts ...kgo.Opt) int64 {
	t.Helper()
	p := client(t, cl, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	base := time.Now().Add(-time.Hour).UnixMilli()
	var rs []*kgo.Record
	for part := range partitions {
		for seq := from; seq < from+n; seq++ {
			rs = append(rs, testRecord(topic, part, seq, base))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return from + n
}

// addTopic adds topic to mirror and waits until it has caught up with the
// cluster it mirrors.
func (d *deployment) addTopic(mirror, topic string, from kafkaconn.Config, partitions int32, extra map[string]any) {
	d.t.Helper()
	body := map[string]any{"topic": topic}
	for k, v := range extra {
		body[k] = v
	}
	d.call(http.MethodPost, "/v1/mirrors/"+mirror+"/topics:add", body, nil, http.StatusOK)
	d.waitCaughtUp(mirror, topic, from, partitions, 2*time.Minute)
}

// remove removes topic from mirror (a failover) and waits until every
// partition is STOPPED.
func (d *deployment) remove(mirror, topic string, partitions int32) {
	d.t.Helper()
	d.call(http.MethodPost, "/v1/mirrors/"+mirror+"/topics:remove?wait=1m", map[string]any{"topic": topic}, nil, http.StatusOK)
	d.waitStates(mirror, topic, partitions, "STOPPED", time.Minute)
}

// mirrored makes a topic of parts partitions named after the scenario,
// writes records to each, and a deployment whose mirror (named like the
// topic) has added it and caught up. It returns the names and the next
// record number.
func (c *conformance) mirrored(t *testing.T, name string, parts int32, records int64) (topic, mirror string, d *deployment, seq int64) {
	t.Helper()
	topic, mirror = c.prefix+name, c.prefix+name
	c.createTopic(t, c.src, topic, parts, nil)
	seq = produceRecords(t, c.src, topic, parts, 0, records)
	d = c.deploy(t, c.dst)
	d.createMirror(mirror, c.src, nil)
	d.addTopic(mirror, topic, c.src, parts, nil)
	return topic, mirror, d, seq
}

// conformFidelity: batches of every codec and a transactional producer's
// committed and aborted transactions, before and after the topic is
// added, arrive as the source's committed records.
func conformFidelity(t *testing.T, c *conformance) {
	topic, mirror := c.prefix+"fidelity", c.prefix+"fidelity"
	const parts = 3
	c.createTopic(t, c.src, topic, parts, nil)
	seq := int64(0)
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(),
		kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		seq = produceRecords(t, c.src, topic, parts, seq, 20, kgo.ProducerBatchCompression(codec))
	}
	transaction := transactions(t, c.src, topic, parts, 10, &seq)
	transaction(true)
	transaction(false)
	transaction(true)

	d := c.deploy(t, c.dst)
	d.createMirror(mirror, c.src, nil)
	d.addTopic(mirror, topic, c.src, parts, nil)
	assertExact(t, c.src, c.dst, topic, parts)

	// Records written while the topic is mirrored.
	transaction(false)
	seq = produceRecords(t, c.src, topic, parts, seq, 20, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	transaction(true)
	d.waitCaughtUp(mirror, topic, c.src, parts, time.Minute)
	n := assertExact(t, c.src, c.dst, topic, parts)
	t.Logf("%d committed records copied exactly; aborted ones left out", n)
}

// conformPauseResume: a paused topic copies nothing, shows its lag, and
// copies what it missed once resumed.
func conformPauseResume(t *testing.T, c *conformance) {
	const parts = 2
	topic, mirror, d, seq := c.mirrored(t, "pause", parts, 30)

	d.call(http.MethodPost, "/v1/mirrors/"+mirror+"/topics:pause?wait=1m", map[string]any{"topic": topic}, nil, http.StatusOK)
	d.waitStates(mirror, topic, parts, "PAUSED", time.Minute)
	before := topicEnds(t, c.dst, topic)
	produceRecords(t, c.src, topic, parts, seq, 25)
	// Describe shows what the pause holds back, from the source's ends.
	waitUntil(t, time.Minute, "a lag of 25 on every paused partition", func() bool {
		for _, p := range d.partitions(mirror, topic) {
			if p.State != "PAUSED" || p.Lag == nil || *p.Lag != 25 {
				return false
			}
		}
		return true
	})
	if after := topicEnds(t, c.dst, topic); !sameEnds(before, after) {
		t.Fatalf("the destination moved while paused: %v, then %v", before, after)
	}

	d.call(http.MethodPost, "/v1/mirrors/"+mirror+"/topics:resume?wait=1m", map[string]any{"topic": topic}, nil, http.StatusOK)
	d.waitCaughtUp(mirror, topic, c.src, parts, time.Minute)
	assertExact(t, c.src, c.dst, topic, parts)
}

func sameEnds(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, end := range a {
		if b[p] != end {
			return false
		}
	}
	return true
}

// conformFailover: removing a caught-up topic stops it with nothing left
// behind, and the destination topic takes writes after the copies.
func conformFailover(t *testing.T, c *conformance) {
	const parts = 2
	topic, mirror, d, seq := c.mirrored(t, "failover", parts, 40)

	var preview struct {
		Failover []struct {
			Lag        int64 `json:"lag"`
			Partitions []struct {
				Partition int32  `json:"partition"`
				Lag       *int64 `json:"lag"`
			} `json:"partitions"`
		} `json:"failover"`
	}
	d.call(http.MethodPost, "/v1/mirrors/"+mirror+"/topics:remove?dry_run=true", map[string]any{"topic": topic}, &preview, http.StatusOK)
	if len(preview.Failover) != 1 || len(preview.Failover[0].Partitions) != parts {
		t.Fatalf("remove's dry run previewed %+v, want the topic's %d partitions", preview.Failover, parts)
	}
	for _, p := range preview.Failover[0].Partitions {
		if p.Lag == nil || *p.Lag != 0 {
			t.Fatalf("remove's dry run: partition %d would leave %s record(s) behind, want 0", p.Partition, optInt(p.Lag))
		}
	}
	d.remove(mirror, topic, parts)
	assertExact(t, c.src, c.dst, topic, parts)
	for _, p := range d.partitions(mirror, topic) {
		if p.LastMirroredSourceOffset == nil || *p.LastMirroredSourceOffset != 39 {
			t.Errorf("partition %d: last mirrored source offset %s, want 39", p.Partition, optInt(p.LastMirroredSourceOffset))
		}
	}

	// The destination topic is writable now, after the copies.
	ends := topicEnds(t, c.dst, topic)
	produceRecords(t, c.dst, topic, parts, seq, 5)
	after := topicEnds(t, c.dst, topic)
	for p := range int32(parts) {
		if after[p] != ends[p]+5 {
			t.Errorf("partition %d of the destination: end %d after 5 writes from %d", p, after[p], ends[p])
		}
	}
}

// conformRestart: a removed topic added again continues where it stopped;
// after the destination was written to, adding it again fails the
// partitions that diverged, and recreate copies it afresh.
func conformRestart(t *testing.T, c *conformance) {
	const parts = 2
	topic, mirror, d, seq := c.mirrored(t, "restart", parts, 30)
	d.remove(mirror, topic, parts)

	// Added again with nothing written to the destination: it re-aligns
	// and copies only what is new.
	seq = produceRecords(t, c.src, topic, parts, seq, 20)
	d.addTopic(mirror, topic, c.src, parts, nil)
	assertExact(t, c.src, c.dst, topic, parts)
	d.remove(mirror, topic, parts)

	// A write on the destination after the failover diverges from the
	// source: adding again refuses to copy over it.
	produceRecords(t, c.dst, topic, parts, 1_000, 1)
	seq = produceRecords(t, c.src, topic, parts, seq, 10)
	d.call(http.MethodPost, "/v1/mirrors/"+mirror+"/topics:add", map[string]any{"topic": topic}, nil, http.StatusOK)
	d.waitStates(mirror, topic, parts, "FAILED", time.Minute)
	d.remove(mirror, topic, parts)

	// recreate drops the destination topic and copies the source afresh.
	d.addTopic(mirror, topic, c.src, parts, map[string]any{"recreate": true})
	n := assertExact(t, c.src, c.dst, topic, parts)
	t.Logf("restarted twice; %d records exact after recreate", n)
	_ = seq
}

// conformGroupOffsets: a consumer group's committed offsets on the source
// are synced to the destination, translated.
func conformGroupOffsets(t *testing.T, c *conformance) {
	const parts = 2
	group := c.prefix + "billing"
	t.Cleanup(func() { c.deleteGroup(t, group) })
	topic, mirror, d, _ := c.mirrored(t, "groups", parts, 50)

	commit := map[int32]int64{0: 20, 1: 35}
	offsets := kadm.Offsets{}
	for p, o := range commit {
		offsets.AddOffset(topic, p, o, -1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srcAdm := kadm.NewClient(client(t, c.src))
	if err := srcAdm.CommitAllOffsets(ctx, group, offsets); err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	for p, o := range commit {
		var tr struct {
			DestinationOffset int64 `json:"destination_offset"`
		}
		d.call(http.MethodGet, "/v1/mirrors/"+mirror+"/topics/"+topic+"/partitions/"+strconv.Itoa(int(p))+"/translate?source_offset="+strconv.FormatInt(o, 10), nil, &tr, http.StatusOK)
		want[p] = tr.DestinationOffset
	}
	dstAdm := kadm.NewClient(client(t, c.dst))
	waitUntil(t, 2*time.Minute, "the group's offsets on the destination", func() bool {
		d.call(http.MethodPost, "/v1/mirrors/"+mirror+":sync", map[string]any{}, nil, http.StatusOK)
		got, err := dstAdm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		for p, o := range want {
			r, ok := got.Lookup(topic, p)
			if !ok || r.At != o {
				return false
			}
		}
		return true
	})
}

// conformConfigSync: the source topic's configs are the destination's at
// creation and after a change, and added partitions are added and copied.
func conformConfigSync(t *testing.T, c *conformance) {
	topic, mirror := c.prefix+"configs", c.prefix+"configs"
	parts := int32(2)
	retention := "7200000"
	c.createTopic(t, c.src, topic, parts, map[string]*string{"retention.ms": &retention})
	seq := produceRecords(t, c.src, topic, parts, 0, 10)
	d := c.deploy(t, c.dst)
	d.createMirror(mirror, c.src, nil)
	d.addTopic(mirror, topic, c.src, parts, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srcAdm, dstAdm := kadm.NewClient(client(t, c.src)), kadm.NewClient(client(t, c.dst))
	configOf := func(key string) string {
		rc, err := dstAdm.DescribeTopicConfigs(ctx, topic)
		if err != nil || len(rc) != 1 || rc[0].Err != nil {
			return ""
		}
		for _, cfg := range rc[0].Configs {
			if cfg.Key == key {
				return cfg.MaybeValue()
			}
		}
		return ""
	}
	if got := configOf("retention.ms"); got != retention {
		t.Fatalf("the destination topic's retention.ms is %q, want the source's %s", got, retention)
	}

	retention = "3600000"
	if _, err := srcAdm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &retention}}, topic); err != nil {
		t.Fatal(err)
	}
	if _, err := srcAdm.CreatePartitions(ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	parts++
	waitUntil(t, 2*time.Minute, "the change of retention.ms and the new partition on the destination", func() bool {
		d.call(http.MethodPost, "/v1/mirrors/"+mirror+":sync", map[string]any{}, nil, http.StatusOK)
		return configOf("retention.ms") == retention && len(topicEnds(t, c.dst, topic)) == int(parts)
	})
	produceRecords(t, c.src, topic, parts, seq, 10)
	d.waitCaughtUp(mirror, topic, c.src, parts, 2*time.Minute)
	assertExact(t, c.src, c.dst, topic, parts)
}

// conformCrash: the server is killed (SIGKILL) while it copies a
// transactional producer's records, and stopped (SIGTERM) once; the copy is
// exact, nothing lost or duplicated.
func conformCrash(t *testing.T, c *conformance) {
	topic, mirror := c.prefix+"crash", c.prefix+"crash"
	const parts = 3
	c.createTopic(t, c.src, topic, parts, nil)
	prod := startProducerOn(t, c.src, topic, parts, 20*time.Millisecond, 2, true)
	d := c.deploy(t, c.dst)
	d.createMirror(mirror, c.src, nil)
	d.call(http.MethodPost, "/v1/mirrors/"+mirror+"/topics:add", map[string]any{"topic": topic}, nil, http.StatusOK)
	copying := func() {
		ends, _ := listEndsOn(c.dst, topic) // none before the topic is made
		waitUntil(t, time.Minute, "copying on every partition", func() bool {
			now, err := listEndsOn(c.dst, topic)
			if err != nil {
				return false
			}
			for p := range int32(parts) {
				if now[p] <= ends[p] {
					return false
				}
			}
			return true
		})
	}
	copying()
	d.server.kill()
	d.start()
	copying()
	if err := d.server.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.server.killed.Store(true)
	<-d.server.exited
	d.start()
	copying()
	sent, err := prod.stop()
	if err != nil {
		t.Fatal(err)
	}
	d.waitCaughtUp(mirror, topic, c.src, parts, 2*time.Minute)
	n := assertExact(t, c.src, c.dst, topic, parts)
	if int64(n) != sent {
		t.Fatalf("the source holds %d committed records, the producer had %d acknowledged", n, sent)
	}
	t.Logf("%d committed records exact through a SIGKILL and a SIGTERM", n)
}

// listEndsOn is topicEnds returning its error: a topic not created yet.
func listEndsOn(cl kafkaconn.Config, topic string) (map[int32]int64, error) {
	adm, err := cl.NewAdmin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// conformFailback: the DR cycle between two deployments. A mirrors the
// source into the destination; the topic fails over to the destination,
// which takes new writes; B, writing to the source, continues from the
// destination and copies only the new records back.
func conformFailback(t *testing.T, c *conformance) {
	topic := c.prefix + "failback"
	toDst, toSrc := c.prefix+"fb-from-source", c.prefix+"fb-from-destination"
	const parts = 2
	c.createTopic(t, c.src, topic, parts, nil)
	seq := produceRecords(t, c.src, topic, parts, 0, 40)
	a := c.deploy(t, c.dst)
	a.createMirror(toDst, c.src, nil)
	a.addTopic(toDst, topic, c.src, parts, nil)
	a.remove(toDst, topic, parts)
	// B proves the overlap from A's offset map, in the destination's
	// __mirror_state: wait until A has published it.
	waitUntil(t, time.Minute, "deployment A's state published", func() bool {
		return metricValue(t, a.api, "kmirror_outbox_unpublished_rows") == "0"
	})
	produceRecords(t, c.dst, topic, parts, seq, 15)

	b := c.deploy(t, c.src)
	b.createMirror(toSrc, c.dst, nil)
	b.addTopic(toSrc, topic, c.dst, parts, map[string]any{"continue": true})
	n := assertExact(t, c.dst, c.src, topic, parts)
	for _, p := range b.partitions(toSrc, topic) {
		if p.LastMirroredSourceOffset == nil || *p.LastMirroredSourceOffset != 54 {
			t.Errorf("partition %d: B's last mirrored offset %s, want 54 (40 copied there, 15 written after the failover)", p.Partition, optInt(p.LastMirroredSourceOffset))
		}
	}
	t.Logf("failed over and back: %d records on both clusters, the same", n)
}

package workers

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devcluster"
	"kmirror/internal/kafkaconn"
	"kmirror/internal/testdb"
	"kmirror/repo"
	"kmirror/service"
)

// Lease timings of data-plane tests: kgo's shortest record delivery
// timeout is 1s, and it must be shorter than the margin.
const (
	engineTTL    = 6 * time.Second
	engineRenew  = 500 * time.Millisecond
	engineMargin = 2 * time.Second
)

// engineEnv is one data-plane test's world: its own database, a source and
// destination kfake cluster, and the service over them.
type engineEnv struct {
	t        *testing.T // nil in benchmarks
	tb       testing.TB
	pool     *pgxpool.Pool
	svc      *service.Service
	clusters *devcluster.Clusters
}

func newEngineEnv(t *testing.T, cfg devcluster.Config) *engineEnv {
	t.Helper()
	env := newEngineEnvTB(t, cfg)
	env.t = t
	return env
}

func newEngineEnvTB(t testing.TB, cfg devcluster.Config) *engineEnv {
	t.Helper()
	pool := testdb.Pool(t)
	clusters, err := devcluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clusters.Close)
	svc, err := service.New(service.Config{Pool: pool, Catalog: service.KafkaCatalog(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return &engineEnv{tb: t, pool: pool, svc: svc, clusters: clusters}
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("KMIRROR_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// instance is one running kmirror data plane: heartbeat, leases, engine.
type instance struct {
	id     string
	hb     *Heartbeat
	leases *LeaseManager
	engine *Engine
}

// startInstance runs an instance with short lease timings; it is stopped
// gracefully at cleanup unless the test stopped or killed it.
func (env *engineEnv) startInstance(id string) *instance {
	env.tb.Helper()
	ctx := context.Background()
	log := testLogger().With("test", env.tb.Name())
	dest := kafkaconn.Config{BootstrapServers: []string{env.clusters.DestinationAddr()}}
	eng, err := NewEngine(EngineConfig{Pool: env.pool, Service: env.svc, InstanceID: id, Destination: dest,
		Logger: log, DeliveryTimeout: time.Second, CheckpointInterval: 200 * time.Millisecond,
		OffsetsInterval: 300 * time.Millisecond, DesiredInterval: 100 * time.Millisecond,
		Retry: RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second}})
	if err != nil {
		env.tb.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		env.tb.Fatal(err)
	}
	hb, err := NewHeartbeat(HeartbeatConfig{Pool: env.pool, InstanceID: id, Interval: engineRenew})
	if err != nil {
		env.tb.Fatal(err)
	}
	if err := hb.Start(ctx); err != nil {
		env.tb.Fatal(err)
	}
	lm, err := NewLeaseManager(LeaseManagerConfig{Pool: env.pool, InstanceID: id, TTL: engineTTL,
		RenewInterval: engineRenew, Margin: engineMargin, Logger: log, Partitions: eng})
	if err != nil {
		env.tb.Fatal(err)
	}
	if err := lm.Start(ctx); err != nil {
		env.tb.Fatal(err)
	}
	in := &instance{id: id, hb: hb, leases: lm, engine: eng}
	env.tb.Cleanup(in.stop)
	return in
}

func (in *instance) stop() {
	in.leases.Stop()
	in.engine.Stop()
	in.hb.Stop()
}

// createMirror creates a mirror over the source and adds topics matching re.
func (env *engineEnv) createMirror(name, re string) {
	env.tb.Helper()
	ctx := context.Background()
	if _, err := env.svc.CreateMirror(ctx, service.MirrorInput{Name: name,
		Source: service.SourceInput{BootstrapServers: env.clusters.SourceAddr()}}, service.WriteOpts{}); err != nil {
		env.tb.Fatal(err)
	}
	if _, err := env.svc.AddTopics(ctx, name, service.AddTopicsInput{Topic: re}); err != nil {
		env.tb.Fatal(err)
	}
}

// partitions returns the describe rows of a mirror.
func (env *engineEnv) partitions(mirror string) []repo.Partition {
	env.tb.Helper()
	ps, err := repo.PartitionsList(context.Background(), env.pool, repo.PartitionsListParams{Mirror: mirror})
	if err != nil {
		env.tb.Fatal(err)
	}
	return ps
}

// waitStates waits until every partition of the mirror is in state.
func (env *engineEnv) waitStates(mirror string, state service.PartitionState, timeout time.Duration) {
	env.t.Helper()
	waitFor(env.t, timeout, fmt.Sprintf("all partitions of %s %s", mirror, state), func() (bool, string) {
		ps := env.partitions(mirror)
		desc := ""
		ok := len(ps) > 0
		for _, p := range ps {
			desc += fmt.Sprintf("%s/%d=%s(%s) ", p.Topic, p.Partition, service.PartitionState(p.State), p.Error)
			if p.State != string(state) {
				ok = false
			}
		}
		return ok, desc
	})
}

// readAll reads every record of a topic partition from offset 0 up to the
// high watermark.
func readAll(t *testing.T, addr, topic string, partition int32, readCommitted bool) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn := kafkaconn.Config{BootstrapServers: []string{addr}}
	adm, err := conn.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	off, err := readOffsets(ctx, adm, topic, partition, readCommitted)
	if err != nil {
		t.Fatalf("offsets of %s/%d at %s: %v", topic, partition, addr, err)
	}
	recs, err := readRecords(ctx, conn, topic, partition, off.start, off.end, int(off.end-off.start)+1, readCommitted)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// assertMirrored checks that each partition of the destination topic holds
// exactly the source's committed records, in order, with nothing extra.
func assertMirrored(t *testing.T, env *engineEnv, topic string, partitions int32) {
	t.Helper()
	for p := int32(0); p < partitions; p++ {
		src := readAll(t, env.clusters.SourceAddr(), topic, p, true)
		dst := readAll(t, env.clusters.DestinationAddr(), topic, p, false)
		if len(src) != len(dst) {
			t.Fatalf("%s/%d: source has %d records, destination %d", topic, p, len(src), len(dst))
		}
		for i := range src {
			if err := sameRecord(src[i], dst[i]); err != nil {
				t.Fatalf("%s/%d record %d (source offset %d, destination %d): %v", topic, p, i, src[i].Offset, dst[i].Offset, err)
			}
		}
	}
}

// waitMirrored waits until the destination has as many records as the
// source's committed records in every partition, then checks them.
func waitMirrored(t *testing.T, env *engineEnv, topic string, partitions int32, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "destination "+topic+" to catch up", func() (bool, string) {
		desc := ""
		ok := true
		for p := int32(0); p < partitions; p++ {
			s := len(readAll(t, env.clusters.SourceAddr(), topic, p, true))
			d := 0
			if destHasTopic(env, topic) {
				d = len(readAll(t, env.clusters.DestinationAddr(), topic, p, false))
			}
			desc += fmt.Sprintf("p%d %d/%d ", p, d, s)
			if s != d {
				ok = false
			}
		}
		return ok, desc
	})
	assertMirrored(t, env, topic, partitions)
}

func destHasTopic(env *engineEnv, topic string) bool {
	return env.clusters.Destination.TopicInfo(topic) != nil
}

// produce writes n records to every partition of a source topic, with keys,
// repeated headers and explicit timestamps, using the given compression.
func produce(t *testing.T, addr, topic string, partitions int32, n int, codec kgo.CompressionCodec) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(codec))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	base := time.UnixMilli(1_700_000_000_000)
	var rs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < n; i++ {
			r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("k-%d-%d", p, i)),
				Value: []byte(fmt.Sprintf(`{"p":%d,"i":%d}`, p, i)), Timestamp: base.Add(time.Duration(i) * time.Millisecond),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte("2")}, {Key: "nil", Value: nil}}}
			if i%7 == 0 {
				r.Key = nil
			}
			if i%11 == 0 {
				r.Value = nil
			}
			rs = append(rs, r)
		}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func sortedRunning(in *instance) []string {
	var out []string
	for _, k := range in.engine.Running() {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}

var _ = kfake.NumBrokers

package statetopic

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// engineEnv is the shared test world with this package's helpers.
type engineEnv struct{ *workertest.Env }

func newEngineEnv(t *testing.T, cfg devcluster.Config) *engineEnv {
	return &engineEnv{workertest.NewEnv(t, cfg)}
}

func (env *engineEnv) startRelay() *Relay {
	env.TB.Helper()
	r, err := NewRelay(RelayConfig{Pool: env.Pool, Partitions: 5,
		Destination:        kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}},
		Interval:           50 * time.Millisecond,
		CheckpointInterval: 300 * time.Millisecond, Logger: workertest.Logger()})
	if err != nil {
		env.TB.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		env.TB.Fatal(err)
	}
	env.TB.Cleanup(r.Stop)
	return r
}

func (env *engineEnv) waitOutboxPublished() {
	env.TB.Helper()
	workertest.WaitFor(env.T, 20*time.Second, "outbox published", func() (bool, string) {
		var n int
		if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
			return false, err.Error()
		}
		return n == 0, ""
	})
}

// TestOutboxRelayPublishesLatestState: every mirror, topic and partition key
// reaches __mirror_state with its latest value, secrets never in clear, and
// a deleted mirror leaves tombstones.
func TestOutboxRelayPublishesLatestState(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 10, kgo.NoCompression())
	env.CreateMirror("m", "orders")
	ctx := context.Background()
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "secret", Source: service.SourceInput{
		BootstrapServers: "127.0.0.1:1", SecurityProtocol: "SASL_PLAINTEXT", SASLMechanism: "PLAIN",
		SASLUsername: "u", SASLPassword: "hunter2-password"}}, service.WriteOpts{SkipConnectivityCheck: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: "gone", Source: service.SourceInput{
		BootstrapServers: env.Clusters.SourceAddr()}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	env.StartInstance("i1")
	env.startRelay()
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitMirrored(t, env.Env, "orders", 2, 20*time.Second)
	if err := env.Svc.DeleteMirror(ctx, "gone", service.DeleteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Svc.PauseTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StatePaused, 20*time.Second)
	env.waitOutboxPublished()

	dest := kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}}
	latest, err := ReadState(ctx, dest)
	if err != nil {
		t.Fatal(err)
	}
	for key, val := range latest {
		if strings.Contains(string(val), "hunter2") {
			t.Fatalf("%s carries a secret in clear: %s", key, val)
		}
	}
	if _, ok := latest["mirror/gone"]; ok {
		t.Fatal("the deleted mirror's record survived its tombstone")
	}
	var topic service.TopicRecord
	mustDecode(t, latest, "topic/m/orders", &topic)
	if topic.DesiredState != service.DesiredPaused || topic.Partitions != 2 {
		t.Fatalf("topic record = %+v", topic)
	}
	var sec service.MirrorRecord
	mustDecode(t, latest, "mirror/secret", &sec)
	if !sec.Source.SASLPasswordSet || sec.Source.SASLUsername != "u" {
		t.Fatalf("mirror record = %+v", sec)
	}
	for p := int32(0); p < 2; p++ {
		var pr service.PartitionRecord
		mustDecode(t, latest, service.PartitionKey("m", "orders", p), &pr)
		if pr.State != "PAUSED" || pr.SrcNext == nil || *pr.SrcNext != 10 {
			t.Fatalf("partition %d record = %+v", p, pr)
		}
	}
	// All of a mirror's records share one __mirror_state partition.
	want := StatePartition("m", 5)
	for p := int32(0); p < 5; p++ {
		for _, r := range workertest.ReadAll(t, env.Clusters.DestinationAddr(), service.StateTopic, p, false) {
			k := string(r.Key)
			if (k == "mirror/m" || strings.HasPrefix(k, "topic/m/") || strings.HasPrefix(k, "partition/m/")) && p != want {
				t.Fatalf("%s is in __mirror_state partition %d, want %d with the rest of mirror m", k, p, want)
			}
		}
	}
}

func mustDecode(t *testing.T, latest map[string][]byte, key string, v any) {
	t.Helper()
	raw, ok := latest[key]
	if !ok {
		keys := make([]string, 0, len(latest))
		for k := range latest {
			keys = append(keys, k)
		}
		t.Fatalf("no %s in __mirror_state; keys: %v", key, keys)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", key, err)
	}
}

// TestRestoreFromStateTopic: mirror under load, lose the database, restore
// it from __mirror_state into an empty one, restart: the destination equals
// the source with nothing lost and nothing duplicated.
func TestRestoreFromStateTopic(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 3, nil); err != nil {
		t.Fatal(err)
	}
	env.CreateMirror("m", "orders")
	in := env.StartInstance("i1")
	env.startRelay()
	env.WaitStates("m", service.StateMirroring, 20*time.Second)

	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 3, 5, kgo.NoCompression())
		}
	}()
	// Let a few checkpoints reach __mirror_state, then lose the database:
	// the instance dies with it (it is killed, not stopped).
	workertest.WaitFor(t, 20*time.Second, "checkpoints published", func() (bool, string) {
		latest, err := ReadState(context.Background(), kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}})
		if err != nil {
			return false, err.Error()
		}
		var pr service.PartitionRecord
		raw, ok := latest[service.PartitionKey("m", "orders", 0)]
		if !ok || json.Unmarshal(raw, &pr) != nil || pr.SrcNext == nil {
			return false, "no checkpoint yet"
		}
		return *pr.SrcNext > 20, ""
	})
	in.Leases.Stop() // the instance goes away with its database
	in.Engine.Stop()
	stop.Store(true)
	<-done

	fresh := testdb.Pool(t)
	svc, err := service.NewControl(service.Config{Pool: fresh, Catalog: service.KafkaCatalog(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := ReadState(context.Background(), kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Restore(context.Background(), latest)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mirrors != 1 || res.Topics != 1 || res.Partitions != 3 {
		t.Fatalf("restore = %+v", res)
	}
	restored := &engineEnv{workertest.EnvOver(t, fresh, svc, env.Clusters)}
	restored.StartInstance("i2")
	restored.WaitStates("m", service.StateMirroring, 30*time.Second)
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 3, 5, kgo.NoCompression())
	workertest.WaitMirrored(t, restored.Env, "orders", 3, 30*time.Second)
}

// TestRelayPublishesOffsetMapChunks: a partition's offset map reaches
// __mirror_state in chunks keyed by where their runs start; a truncated
// map tombstones the chunks it lost, a grown run is published again, a
// recreated partition's map is tombstoned, and deleting the mirror
// tombstones every chunk.
func TestRelayPublishesOffsetMapChunks(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	env.CreateMirror("m", "orders")
	ctx := context.Background()
	w := service.OffsetMapChunkWidth
	id := repo.PartitionID{Mirror: "m", Topic: "orders", Partition: 0}
	// What a worker would have saved: checkpoint and runs, as one write.
	save := func(src, dst int64, runs ...repo.OffsetRun) {
		t.Helper()
		tx, err := env.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `DELETE FROM offset_map_runs WHERE mirror = 'm'`); err != nil {
			t.Fatal(err)
		}
		if err := repo.OffsetRunsRestore(ctx, tx, id, runs); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `UPDATE mirror_partitions SET src_next = $1, dst_next = $2, updated_at = now()
			WHERE mirror = 'm'`, src, dst); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dest := kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}}
	waitMap := func(what string, chunks int, want ...repo.OffsetRun) {
		t.Helper()
		workertest.WaitFor(t, 20*time.Second, what, func() (bool, string) {
			latest, err := ReadState(ctx, dest)
			if err != nil {
				return false, err.Error()
			}
			snap, err := service.DecodeState(latest)
			if err != nil {
				return false, err.Error()
			}
			got := snap.OffsetMaps[id]
			return snap.OffsetMapChunks == chunks && slices.Equal(got, want),
				fmt.Sprintf("%d chunk(s): %v", snap.OffsetMapChunks, got)
		})
	}
	runs := []repo.OffsetRun{{SrcStart: 0, DstStart: 0, Count: 10}, {SrcStart: w + 5, DstStart: 10, Count: 3},
		{SrcStart: 3 * w, DstStart: 13, Count: 1}, {SrcStart: 5 * w, DstStart: 14, Count: 1}}
	save(5*w+1, 15, runs...)
	// Every record is produced on its own: the order of a partition's
	// records holds across flushes.
	r, err := NewRelay(RelayConfig{Pool: env.Pool, Partitions: 5, Destination: dest,
		Interval: 50 * time.Millisecond, CheckpointInterval: 300 * time.Millisecond, Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	r.batchBytes = 1
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	waitMap("four chunks published", 4, runs...)

	// The destination lost data: the map was truncated behind the old
	// checkpoint.
	save(10, 10, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 10})
	waitMap("lost chunks tombstoned", 1, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 10})

	// The run grows past its chunk's width: it stays in its chunk.
	save(w+20, w+20, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: w + 20})
	waitMap("the grown run published", 1, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: w + 20})

	// Recreated: the checkpoint and the map are forgotten.
	if _, err := env.Pool.Exec(ctx, `DELETE FROM offset_map_runs WHERE mirror = 'm'`); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE mirror_partitions SET src_next = NULL, dst_next = NULL, updated_at = now()`); err != nil {
		t.Fatal(err)
	}
	waitMap("the recreated partition's map tombstoned", 0)
	save(3, 3, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 3})
	waitMap("mapped again", 1, repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 3})

	if _, err := env.Svc.RemoveTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	if err := env.Svc.DeleteMirror(ctx, "m", service.DeleteOpts{}); err != nil {
		t.Fatal(err)
	}
	waitMap("the deleted mirror's chunks tombstoned", 0)
}

package statetopic

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestRestoreWhenPostgresOrTheDestinationGoesAway: restore reads
// __mirror_state whole before it writes, and writes in one transaction. The
// destination down: reading fails within its deadline and nothing is
// written. Postgres gone in the middle of the write: the transaction is
// lost whole and the database stays empty. Either way, running restore
// again once they are back restores everything.
func TestRestoreWhenPostgresOrTheDestinationGoesAway(t *testing.T) {
	t.Parallel()
	env, dest := publishedMirror(t, devcluster.Config{DataDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	fresh := testdb.Pool(t)
	svc, err := service.NewControl(service.Config{Pool: fresh, Catalog: service.KafkaCatalog(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	assertEmpty := func(when string) {
		t.Helper()
		if ms, err := repo.MirrorsList(ctx, fresh); err != nil || len(ms) != 0 {
			t.Fatalf("%s: the database has %d mirror(s) (%v), want none", when, len(ms), err)
		}
	}

	// The destination is down: the read fails at its deadline.
	if err := env.Clusters.Down("destination"); err != nil {
		t.Fatal(err)
	}
	readCtx, readCancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = ReadState(readCtx, dest)
	readCancel()
	if err == nil {
		t.Fatal("read __mirror_state from a destination that is down")
	}
	t.Logf("destination down: %v", err)
	assertEmpty("after the failed read")
	if err := env.Clusters.Up("destination"); err != nil {
		t.Fatal(err)
	}
	latest, err := ReadState(ctx, dest)
	if err != nil {
		t.Fatal(err)
	}

	// Postgres goes away while the restore writes: its session is
	// terminated while it waits (on a lock held here) for its last
	// statement.
	blocker, err := fresh.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := svc.Restore(ctx, latest)
		done <- err
	}()
	terminateWaiting(t, ctx, fresh)
	if err := <-done; err == nil {
		t.Fatal("restore succeeded on a terminated session")
	} else {
		t.Logf("Postgres session lost: %v", err)
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	assertEmpty("after the lost session")

	// Both back: the same restore, from the start, restores everything.
	res, err := svc.Restore(ctx, latest)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mirrors != 1 || res.Partitions != 2 || res.OffsetRuns != 2 {
		t.Fatalf("restore = %+v", res)
	}
}

// terminateWaiting terminates the one session of pool's database that
// waits on a lock, once there is one.
func terminateWaiting(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	workertest.WaitFor(t, 10*time.Second, "the restore waiting on the lock", func() (bool, string) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n)
		if err != nil && !errors.Is(err, context.Canceled) {
			return false, err.Error()
		}
		return n == 1, "no session waits yet"
	})
}

// TestRestoreLowersACheckpointPastItsMap: when __mirror_state holds a
// checkpoint past the end of its partition's offset map (the map of an
// older relay, or a database changed behind it), restore moves the
// checkpoint back to the map's end and PREPARING maps the rest again from
// the source, so translation ends up exactly as the control's.
func TestRestoreLowersACheckpointPastItsMap(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic(e2eTopic, e2ePartitions, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srcConn := kafkaconn.Config{BootstrapServers: []string{env.Clusters.SourceAddr()}}
	dest := kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}}
	produceTransactions(t, ctx, srcConn)
	env.CreateMirror("m", e2eTopic)
	in := env.StartInstance("i1")
	relay := startRelayTo(t, env.Pool, dest)
	ends := endOffsets(t, ctx, adminOf(t, srcConn))
	waitCheckpointsAt(t, env.Pool, ends)
	waitPublished(t, ctx, env.Pool, dest)
	in.Stop()
	relay.Stop()

	latest, err := ReadState(ctx, dest)
	if err != nil {
		t.Fatal(err)
	}
	// Partition 0's map loses its last run (source 18-20, destination
	// 10-12): it ends three records before the checkpoint.
	key := service.OffsetMapKey("m", e2eTopic, 0, 0)
	var chunk service.OffsetMapRecord
	if err := json.Unmarshal(latest[key], &chunk); err != nil {
		t.Fatal(err)
	}
	if n := len(chunk.Runs); n != 3 || chunk.Runs[n-1] != [3]int64{18, 10, 3} {
		t.Fatalf("partition 0's runs %v", chunk.Runs)
	}
	chunk.Runs = chunk.Runs[:2]
	if latest[key], err = json.Marshal(chunk); err != nil {
		t.Fatal(err)
	}

	fresh := testdb.Pool(t)
	svc, err := service.NewControl(service.Config{Pool: fresh, Catalog: service.KafkaCatalog(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Restore(ctx, latest)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Lowered, []string{"m/orders/0"}) {
		t.Fatalf("lowered %v, want partition 0", res.Lowered)
	}
	if p, err := repo.PartitionsGet(ctx, fresh, "m", e2eTopic, 0); err != nil || *p.SrcNext != 17 || *p.DstNext != 10 {
		t.Fatalf("restored checkpoint %+v %v, want (17, 10)", p, err)
	}
	restored := &engineEnv{workertest.EnvOver(t, fresh, svc, env.Clusters)}
	restored.StartInstance("i2")
	restored.WaitStates("m", service.StateMirroring, 30*time.Second)
	waitCheckpointsAt(t, fresh, ends)
	assertSameTranslations(t, ctx, env.Svc, svc, ends)
	workertest.WaitMirrored(t, restored.Env, e2eTopic, e2ePartitions, 20*time.Second)
}

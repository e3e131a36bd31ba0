package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/workers/statetopic"
	"kmirror/workers/workertest"
)

// TestRestoreCommand: kmirror restore rebuilds an empty database and says
// what it restored; restore --verify exits 0 on it, and 1 with the
// difference once a checkpoint is changed by hand; a second restore into
// the same database is refused.
func TestRestoreCommand(t *testing.T) {
	t.Parallel()
	env := workertest.NewEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 10, kgo.NoCompression())
	env.CreateMirror("m", "orders")
	in := env.StartInstance("i1")
	relay, err := statetopic.NewRelay(statetopic.RelayConfig{Pool: env.Pool, Partitions: 5,
		Destination: kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}},
		Interval:    50 * time.Millisecond, CheckpointInterval: 300 * time.Millisecond, Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := relay.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", "MIRRORING", 20*time.Second)
	workertest.WaitMirrored(t, env, "orders", 2, 20*time.Second)
	in.Stop()
	relay.Stop() // publishes what is left, the last checkpoints too

	dbURL := testdb.New(t)
	kmirror := func(args ...string) (int, string) {
		t.Helper()
		var out, errs bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		args = append(args, "--database-url", dbURL, "--destination-bootstrap", env.Clusters.DestinationAddr())
		code := run(ctx, append([]string{"restore"}, args...), &out, &errs)
		return code, out.String() + errs.String()
	}
	if code, out := kmirror(); code != 0 || !strings.Contains(out,
		"Restored 1 mirror(s), 1 topic(s), 2 partition state(s), 2 offset-map run(s) of 2 partition(s) and 0 synced ACL(s)") {
		t.Fatalf("restore: exit %d\n%s", code, out)
	}
	code, out := kmirror("--verify")
	t.Logf("verify:\n%s", out)
	if code != 0 || !strings.Contains(out, "The database agrees with __mirror_state.") {
		t.Fatalf("verify of a good restore: exit %d\n%s", code, out)
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(context.Background(), `UPDATE mirror_partitions SET src_next = 4, dst_next = 4
		WHERE mirror = 'm' AND partition = 0`); err != nil {
		t.Fatal(err)
	}
	code, out = kmirror("--verify")
	t.Logf("verify after the change:\n%s", out)
	if code != 1 || !strings.Contains(out, "checkpoints: m/orders/0: MIRRORING src_next 10 dst_next 10 in __mirror_state, MIRRORING src_next 4 dst_next 4 in the database") ||
		!strings.Contains(out, "offset maps: m/orders/0: the map reaches destination offset 10, past the checkpoint's 4") ||
		!strings.Contains(out, "restore verification found 2 difference(s)") {
		t.Fatalf("verify of a hand-changed checkpoint: exit %d\n%s", code, out)
	}
	if code, out := kmirror(); code != 1 || !strings.Contains(out, "restore needs an empty one (to check an earlier restore, use --verify)") {
		t.Fatalf("a second restore: exit %d\n%s", code, out)
	}
	if ms, err := repo.MirrorsList(context.Background(), pool); err != nil || len(ms) != 1 {
		t.Fatalf("mirrors after the refused restore: %d %v", len(ms), err)
	}
}

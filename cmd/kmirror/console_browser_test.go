package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/api"
	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
	"kmirror/workers/workertest"
)

// consoleE2E is the browser test suite, relative to this package.
const consoleE2E = "../../web/e2e"

// TestConsoleInBrowser runs the web console's browser tests
// (web/e2e/console.test.mjs: Chromium driven by playwright-core, checked by
// axe-core) against a real server, started as kmirror dev starts it:
// Postgres, a kfake source with demo traffic and a kfake destination, and
// API tokens, so that sign-in and the viewer and operator roles are
// covered too. A second server, control plane only, serves a mirror of
// 10,000 partitions (seedBigMirror), on which the console's cost is
// measured.
//
// It needs node, Chromium and `npm ci` in web/e2e. Without them it skips,
// unless KMIRROR_BROWSER_TESTS=required (as .ci/run sets), when it fails.
// KMIRROR_SCREENSHOTS=dir keeps the screenshots; docs/screenshots holds the
// current ones, refreshed with KMIRROR_SCREENSHOTS=$PWD/docs/screenshots.
// KMIRROR_CONSOLE_TESTS=regexp runs only the browser tests whose names
// match (node's --test-name-pattern); most continue from the state the
// ones before them left, so that is for those that do not.
func TestConsoleInBrowser(t *testing.T) {
	needBrowser(t)
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	dbURL := testdb.New(t)
	clusters, err := devcluster.Start(devcluster.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clusters.Close)
	if err := clusters.StartDemo(ctx, devcluster.Demo{RecordsPerSecond: 5,
		Topics: map[string]int32{"orders": 3, "payments": 2, "inventory": 1}}); err != nil {
		t.Fatal(err)
	}
	seedFailback(t, clusters)
	const operatorToken = "browser-operator-token"
	tokens := api.Tokens{Admin: "browser-admin-token", Read: "browser-read-token", File: []api.Token{
		{Name: "browser-ci", Role: api.RoleOperator, Hash: sha256.Sum256([]byte(operatorToken))}}}
	addr := startMirroringConsoleServer(ctx, t, dbURL, "browser", clusters, tokens)
	bigAddr := startConsoleServer(ctx, t, serverConfig{
		Listen: "127.0.0.1:0", DatabaseURL: seedBigMirror(t), InstanceID: "browser-big",
		LeaseTTL: 15 * time.Second, LeaseRenewInterval: 5 * time.Second, Tokens: tokens,
	})

	var only []string
	if p := os.Getenv("KMIRROR_CONSOLE_TESTS"); p != "" {
		only = []string{"--test-name-pattern=" + p}
	}
	runConsoleFile(ctx, t, "console.test.mjs", 5*time.Minute, only,
		"KMIRROR_URL=http://"+addr,
		"KMIRROR_BIG_URL=http://"+bigAddr,
		"KMIRROR_ADMIN_TOKEN="+tokens.Admin,
		"KMIRROR_READ_TOKEN="+tokens.Read,
		"KMIRROR_OPERATOR_TOKEN="+operatorToken,
		"KMIRROR_SOURCE="+clusters.SourceAddr(),
		"KMIRROR_DESTINATION="+clusters.DestinationAddr(),
	)
}

// runConsoleFile runs one of web/e2e's node test files against the
// servers its env names, one test at a time, and fails t with the
// runner's output if any test fails or the file outlasts limit. Its
// screenshots go to screenshotsDir.
func runConsoleFile(ctx context.Context, t *testing.T, file string, limit time.Duration, args []string, env ...string) {
	t.Helper()
	shots := screenshotsDir(t)
	runCtx, stop := context.WithTimeout(ctx, limit)
	defer stop()
	args = append([]string{"--test", "--test-reporter=spec", "--test-concurrency=1"}, args...)
	cmd := exec.CommandContext(runCtx, "node", append(args, file)...)
	cmd.Dir = consoleE2E
	cmd.Env = append(append(os.Environ(), env...), "KMIRROR_SCREENSHOTS="+shots, "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("browser tests (screenshots in %s):\n%s", shots, out.String())
	if err != nil {
		t.Fatalf("browser tests failed: %v", err)
	}
}

// startMirroringConsoleServer runs a server that mirrors into clusters'
// destination with the server's lease timings, a 5 s source timeout and
// a history point a second, as the console's browser tests use it.
func startMirroringConsoleServer(ctx context.Context, t *testing.T, dbURL, id string, clusters *devcluster.Clusters, tokens api.Tokens) string {
	t.Helper()
	return startConsoleServer(ctx, t, serverConfig{
		Listen: "127.0.0.1:0", DatabaseURL: dbURL, InstanceID: id,
		Destination:        kafkaconn.Config{BootstrapServers: []string{clusters.DestinationAddr()}},
		LeaseTTL:           15 * time.Second,
		LeaseRenewInterval: 5 * time.Second,
		SourceTimeout:      5 * time.Second,
		HistoryInterval:    time.Second,
		Tokens:             tokens,
	})
}

// startConsoleServer runs a server with cfg until ctx ends and returns
// the address it serves on; the test's cleanup waits for it to stop.
func startConsoleServer(ctx context.Context, t *testing.T, cfg serverConfig) string {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	serverErr := make(chan error, 1)
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Ready = func(addr string) { ready <- addr }
	go func() { serverErr <- runServer(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-serverErr:
		case <-time.After(30 * time.Second):
			t.Errorf("server %s did not stop within 30s", cfg.InstanceID)
		}
	})
	select {
	case addr := <-ready:
		return addr
	case err := <-serverErr:
		t.Fatalf("server %s: %v", cfg.InstanceID, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("server %s not ready within 60s", cfg.InstanceID)
	}
	return ""
}

// bigMirror shapes the mirror the console's cost test reads: 10,000
// partitions in one mirror, as 90 topics of 100 partitions (t01 … t90) and
// one of 1,000 (wide).
const (
	bigTopics          = 90
	bigTopicPartitions = 100
	bigWidePartitions  = 1_000
)

// seedBigMirror returns a database holding mirror big, its topics and
// partitions written straight into the tables, as an add and the workers
// would leave them. No worker runs them (the server that serves big has no
// destination: it runs the control plane only), so nothing but the test
// changes what the console shows. Each partition lags 12 records. Partition
// 7 of each topic is FAILED with an error (91), and partition 8 of t10,
// t20, … t90 retries one in MIRRORING (9): 100 with an error, two pages of
// the console's attention list. t03's first three partitions kept a
// divergent tail.
func seedBigMirror(t *testing.T) string {
	t.Helper()
	dbURL := testdb.New(t)
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('big', 'source.example:9092')`, nil},
		{`INSERT INTO mirror_topics (mirror, topic, desired_state, read_only_enforced)
			SELECT 'big', 't' || lpad(g::text, 2, '0'), 'mirroring', true FROM generate_series(1, $1::int) g
			UNION ALL SELECT 'big', 'wide', 'mirroring', true`, []any{bigTopics}},
		{`INSERT INTO mirror_partitions (mirror, topic, partition, state, src_next, dst_next, source_end_offset,
				destination_end_offset, progressed_at, error, retry_attempt)
			SELECT 'big', t.topic, p,
				CASE WHEN p = 7 THEN 'FAILED' ELSE 'MIRRORING' END, 1000, 990, 1012, 990, now(),
				CASE WHEN p = 7 THEN 'source topic ' || t.topic || ' was recreated'
					WHEN p = 8 AND t.topic ~ '0$' THEN 'fetch from the source: connection refused; retrying' END,
				CASE WHEN p = 7 THEN 2 ELSE 0 END
			FROM mirror_topics t, generate_series(0, $1::int - 1) p
			WHERE t.mirror = 'big' AND (t.topic = 'wide' OR p < $2::int)`, []any{bigWidePartitions, bigTopicPartitions}},
		{`UPDATE mirror_partitions SET divergent_tail_start = 20, divergent_tail_end = 23, divergent_tail_records = 3
			WHERE mirror = 'big' AND topic = 't03' AND partition < 3`, nil},
		{`ANALYZE`, nil},
	} {
		if _, err := conn.Exec(t.Context(), st.sql, st.args...); err != nil {
			t.Fatalf("seed the big mirror: %v\n%s", err, st.sql)
		}
	}
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM mirror_partitions WHERE mirror = 'big'`).Scan(&n); err != nil || n != 10_000 {
		t.Fatalf("the big mirror has %d partitions (%v), want 10,000", n, err)
	}
	return dbURL
}

// seedFailback makes the topics of the console's failback test (add with
// continue). On fb-copied the destination already holds the first 20
// records of each of the source's partitions, copied there by another tool
// (the same keys, values, headers and timestamps), and the source has 5
// more: the dry run proves the overlap by comparing records and plans to
// copy only those 5. On fb-forged the destination's copy differs from the
// source a few records before its last one, so nothing proves it is the
// source's history: the partition would fail.
func seedFailback(t *testing.T, clusters *devcluster.Clusters) {
	t.Helper()
	topics := map[string]int32{"fb-copied": 2, "fb-forged": 1}
	for topic, partitions := range topics {
		for _, c := range []*kfake.Cluster{clusters.Source, clusters.Destination} {
			if err := c.CreateTopic(topic, partitions, nil); err != nil {
				t.Fatalf("create %s: %v", topic, err)
			}
		}
	}
	const copied, more = 20, 5
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var src, dst []*kgo.Record
	for topic, partitions := range topics {
		for p := range partitions {
			for i := range copied + more {
				r := &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "account-%d", i%4),
					Value:     fmt.Appendf(nil, "%s/%d record %d", topic, p, i),
					Headers:   []kgo.RecordHeader{{Key: "origin", Value: []byte("console-test")}},
					Timestamp: at.Add(time.Duration(i) * time.Second)}
				src = append(src, r)
				if i >= copied {
					continue
				}
				c := *r
				if topic == "fb-forged" && i == copied-3 {
					c.Value = []byte("not the source's")
				}
				dst = append(dst, &c)
			}
		}
	}
	workertest.ProduceRecords(t, workertest.Plain(clusters.SourceAddr()), src...)
	workertest.ProduceRecords(t, workertest.Plain(clusters.DestinationAddr()), dst...)
}

// browserTestsMissing names what the browser tests need and this machine
// lacks, or returns "".
func browserTestsMissing() string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not installed"
	}
	if _, err := exec.LookPath("kcat"); err != nil {
		return "kcat is not installed"
	}
	chromium := cmp.Or(os.Getenv("KMIRROR_CHROMIUM"), "/usr/bin/chromium")
	if _, err := os.Stat(chromium); err != nil {
		return chromium + " is not installed"
	}
	for _, m := range []string{"playwright-core", "axe-core"} {
		if _, err := os.Stat(filepath.Join(consoleE2E, "node_modules", m)); err != nil {
			return m + " is not installed (run npm ci in web/e2e)"
		}
	}
	return ""
}

// needBrowser skips the test when node, Chromium or web/e2e's packages are
// missing, or fails it when KMIRROR_BROWSER_TESTS=required (as in CI).
func needBrowser(t *testing.T) {
	t.Helper()
	if missing := browserTestsMissing(); missing != "" {
		if os.Getenv("KMIRROR_BROWSER_TESTS") == "required" {
			t.Fatalf("browser tests cannot run: %s", missing)
		}
		t.Skipf("browser tests skipped: %s (KMIRROR_BROWSER_TESTS=required makes this a failure)", missing)
	}
}

// screenshotsDir is where a browser test saves its screenshots:
// KMIRROR_SCREENSHOTS, or a directory removed after the test.
func screenshotsDir(t *testing.T) string {
	t.Helper()
	shots := os.Getenv("KMIRROR_SCREENSHOTS")
	if shots == "" {
		return t.TempDir()
	}
	abs, err := filepath.Abs(shots)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/pgserver"
	"kmirror/internal/devenv/procstat"
	"kmirror/internal/testing/testdb"
)

// BenchmarkHandoverProcesses is workers/partition's BenchmarkHandover with
// every instance its own `kmirror server` process, at the default lease
// timings (TTL 15 s), under a trickle of 50 records/s: three servers share
// KMIRROR_BENCH_PARTITIONS partitions (default 3000, a multiple of 300, in
// topics of 100). Server a is killed (SIGKILL), then b, holding half of
// them by then, gets a SIGTERM. Each time, a marker is written to every
// partition the server held, right after the signal, and the benchmark
// times from the signal until every marker is on the destination. Targets
// (issue 28): TTL + 5 s after a SIGKILL, 2 s after a SIGTERM. The copy is
// checked exact at the end.
//
// KMIRROR_BENCH_DURABLE=1 runs it on a PostgreSQL server of its own with
// fsync, synchronous_commit and full_page_writes on, as in production (the
// shared test server trades them for speed), and logs the statements that
// took the most time (pg_stat_statements) over the two takeovers.
// KMIRROR_BENCH_SECOND=SIGKILL kills b too (SIGKILL), so that c alone
// takes the 5,100 partitions of a crashed instance, half of them taken over
// once already; with KMIRROR_BENCH_WALK=1 as well, b is killed right after
// it copied a record to each of its partitions, so that most of them hold
// records past their checkpoints, which c walks and compares.
// KMIRROR_BENCH_PROFILE_DIR=dir writes CPU profiles of server c there: over
// the 25 s after the SIGKILL (crash-survivor.pprof) and the 3 s after the
// SIGTERM (handover-survivor.pprof) or the 25 s after the second SIGKILL
// (second-crash-survivor.pprof).
//
//	go test ./internal/testing/e2e -run '^$' -bench HandoverProcesses -benchtime=1x -timeout 20m
func BenchmarkHandoverProcesses(b *testing.B) {
	const perTopic = 100
	total := 3000
	if v := os.Getenv("KMIRROR_BENCH_PARTITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 300 || n%300 != 0 {
			b.Fatalf("KMIRROR_BENCH_PARTITIONS=%q: want a multiple of 300", v)
		}
		total = n
	}
	for range b.N {
		runHandover(b, total/perTopic, perTopic)
	}
}

func runHandover(b *testing.B, topics int, perTopic int32) {
	var w *world
	var stmts *pgStatements
	if os.Getenv("KMIRROR_BENCH_DURABLE") == "1" {
		var dbURL string
		dbURL, stmts = durableDatabase(b)
		w = newWorldOn(b, "ho-000", perTopic, dbURL)
	} else {
		w = newWorld(b, "ho-000", perTopic)
	}
	w.mirror = "ho"
	names := []string{"ho-000"}
	for i := 1; i < topics; i++ {
		names = append(names, fmt.Sprintf("ho-%03d", i))
		if err := w.clusters.Source.CreateTopic(names[i], perTopic, nil); err != nil {
			b.Fatal(err)
		}
	}
	w.topic = `ho-\d+`
	w.args = []string{"--lease-ttl", "15s", "--lease-renew-interval", "5s"}
	servers := map[string]*serverProcess{}
	var api string
	for _, id := range []string{"a", "b"} {
		servers[id], api = w.start(id)
	}
	profileDir := os.Getenv("KMIRROR_BENCH_PROFILE_DIR")
	debug := ""
	if profileDir != "" {
		debug = freeLoopbackAddr(b)
		w.args = append(w.args, "--debug-listen", debug)
	}
	servers["c"], _ = w.start("c")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := apiCall(ctx, api, "POST", "/v1/mirrors", map[string]any{
		"name": w.mirror, "source": map[string]any{"bootstrap_servers": w.clusters.SourceAddr()},
	}, nil, 201); err != nil {
		b.Fatal(err)
	}
	if err := apiCall(ctx, api, "POST", "/v1/mirrors/"+w.mirror+"/topics:add",
		map[string]any{"topic": w.topic}, nil, 200); err != nil {
		b.Fatal(err)
	}

	src, err := kgo.NewClient(kgo.SeedBrokers(w.clusters.SourceAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	stopTrickle := trickle(src, names, perTopic, 50)
	defer stopTrickle()

	n := topics * int(perTopic)
	waitUntil(b, 5*time.Minute, "every partition MIRRORING, a third on each server", func() bool {
		owned := w.owners()
		mirroring := 0
		for _, o := range owned {
			mirroring += len(o)
		}
		for _, id := range []string{"a", "b", "c"} {
			if k := len(owned[id]); k < n/3-1 || k > n/3+1 {
				return false
			}
		}
		return mirroring == n
	})
	b.ResetTimer()
	stmts.reset(b)

	crashed := w.owners()["a"]
	start := time.Now()
	servers["a"].kill()
	crashProfiled := make(chan struct{})
	if profileDir != "" {
		go func() {
			defer close(crashProfiled)
			profileWindow(b, debug, filepath.Join(profileDir, "crash-survivor.pprof"), 25*time.Second)
		}()
	} else {
		close(crashProfiled)
	}
	crash := markersCopied(b, w, src, "SIGKILL of a", crashed, start, 2*time.Minute)
	<-crashProfiled
	stmts.log(b, "SIGKILL of a")

	// b holds about half once a's partitions are shared out again.
	waitUntil(b, time.Minute, "every partition MIRRORING on b or c", func() bool {
		o := w.owners()
		return len(o["b"])+len(o["c"]) == n
	})
	stopped := w.owners()["b"]
	stmts.reset(b)
	secondKill := os.Getenv("KMIRROR_BENCH_SECOND") == "SIGKILL"
	var second time.Duration
	if secondKill {
		if os.Getenv("KMIRROR_BENCH_WALK") == "1" {
			// b dies right after copying a record to each of its
			// partitions, before most of its checkpoints say so: c must
			// walk and compare them, as after a crash under traffic.
			markersCopied(b, w, src, "records copied by b just before its SIGKILL", stopped, time.Now(), time.Minute)
		}
		start = time.Now()
		servers["b"].kill()
		profiled := make(chan struct{})
		if profileDir != "" {
			go func() {
				defer close(profiled)
				profileWindow(b, debug, filepath.Join(profileDir, "second-crash-survivor.pprof"), 25*time.Second)
			}()
		} else {
			close(profiled)
		}
		second = markersCopied(b, w, src, "SIGKILL of b", stopped, start, 2*time.Minute)
		stmts.log(b, "SIGKILL of b")
		b.StopTimer()
		<-profiled
	} else {
		servers["b"].killed.Store(true) // its exit is expected
		meter := startMeter(b, servers["b"], servers["c"])
		start = time.Now()
		if err := servers["b"].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			b.Fatal(err)
		}
		profiled := make(chan struct{})
		if profileDir != "" {
			go func() {
				defer close(profiled)
				profileWindow(b, debug, filepath.Join(profileDir, "handover-survivor.pprof"), 3*time.Second)
			}()
		} else {
			close(profiled)
		}
		exited := make(chan time.Duration, 1)
		go func() {
			<-servers["b"].exited
			exited <- time.Since(start)
		}()
		second = markersCopied(b, w, src, "SIGTERM to b", stopped, start, 2*time.Minute)
		used := meter()
		stmts.log(b, "SIGTERM to b")
		select {
		case d := <-exited:
			b.Logf("b exited with code %d, %s after its SIGTERM; %s", servers["b"].cmd.ProcessState.ExitCode(),
				d.Round(time.Millisecond), used(servers["b"].cmd.ProcessState))
		case <-time.After(30 * time.Second):
			b.Errorf("b still running 30 s after its SIGTERM")
		}
		b.StopTimer()
		<-profiled
	}

	stopTrickle()
	srcEnds := map[string]map[int32]int64{}
	for _, t := range names {
		srcEnds[t] = endOffsets(b, w.clusters.SourceAddr(), t, false)
	}
	waitUntil(b, 2*time.Minute, "every destination end at its source end", func() bool {
		for _, t := range names {
			got, err := listEnds(w.clusters.DestinationAddr(), t, false)
			if err != nil {
				return false
			}
			for p, end := range srcEnds[t] {
				if got[p] != end {
					return false
				}
			}
		}
		return true
	})
	b.ReportMetric(crash.Seconds(), "crash-takeover-s")
	if secondKill {
		b.ReportMetric(second.Seconds(), "second-crash-takeover-s")
		b.Logf("SIGKILL of a (%d partitions): markers all copied after %s; SIGKILL of b (%d partitions): after %s (target TTL 15s + 5s for both); destination ends equal the source's",
			len(crashed), crash.Round(time.Millisecond), len(stopped), second.Round(time.Millisecond))
		return
	}
	b.ReportMetric(second.Seconds(), "graceful-handover-s")
	b.Logf("SIGKILL of a (%d partitions): markers all copied after %s (target TTL 15s + 5s); SIGTERM to b (%d partitions): after %s (target 2s); destination ends equal the source's",
		len(crashed), crash.Round(time.Millisecond), len(stopped), second.Round(time.Millisecond))
}

// startMeter reads the CPU time used so far by stopping and survivor, this
// process (the clusters) and PostgreSQL's processes. The func it returns
// reads them again, and its func says how many cores each used in between;
// stopping's end is read from its state once it has exited.
func startMeter(b *testing.B, stopping, survivor *serverProcess) func() func(*os.ProcessState) string {
	read := func() (c, self, pg time.Duration) {
		c, _ = procstat.CPU(survivor.cmd.Process.Pid)
		self, _ = procstat.CPU(procstat.Self)
		pg, _, _ = procstat.CommandCPU("postgres")
		return
	}
	b0, err := procstat.CPU(stopping.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	c0, self0, pg0 := read()
	t0 := time.Now()
	return func() func(*os.ProcessState) string {
		c1, self1, pg1 := read()
		d := time.Since(t0).Seconds()
		return func(st *os.ProcessState) string {
			return fmt.Sprintf("cores used until the last marker: survivor %.2f, clusters and test %.2f, postgres %.2f; the stopped server used %.2f s of CPU after its SIGTERM",
				(c1-c0).Seconds()/d, (self1-self0).Seconds()/d, (pg1-pg0).Seconds()/d, (st.UserTime() + st.SystemTime() - b0).Seconds())
		}
	}
}

// freeLoopbackAddr is a loopback address with a port free a moment ago.
func freeLoopbackAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// profileWindow writes a CPU profile of the next d of the server whose
// --debug-listen is addr.
func profileWindow(b *testing.B, addr, path string, d time.Duration) {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())))
	if err != nil {
		b.Errorf("profile: %v", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		b.Errorf("profile: %v", err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		b.Errorf("profile: %v", err)
	}
}

// topicPartition names a partition of one of the benchmark's topics.
type topicPartition struct {
	topic string
	part  int32
}

// owners maps each server to the partitions of w's mirror it holds
// MIRRORING.
func (w *world) owners() map[string][]topicPartition {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := w.pool.Query(ctx, `SELECT topic, partition, lease_owner FROM mirror_partitions
		WHERE mirror = $1 AND state = 'MIRRORING' AND lease_owner IS NOT NULL`, w.mirror)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rs.Close()
	out := map[string][]topicPartition{}
	for rs.Next() {
		var tp topicPartition
		var owner string
		if err := rs.Scan(&tp.topic, &tp.part, &owner); err != nil {
			w.t.Fatal(err)
		}
		out[owner] = append(out[owner], tp)
	}
	if err := rs.Err(); err != nil {
		w.t.Fatal(err)
	}
	return out
}

// trickle writes perSecond records a second, each to a random partition of
// topics, until the returned func is called (more than once is fine).
func trickle(cl *kgo.Client, topics []string, perTopic int32, perSecond int) func() {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tk := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			r := &kgo.Record{Topic: topics[rand.IntN(len(topics))], Partition: rand.Int32N(perTopic), Value: []byte("trickle")}
			cl.Produce(context.Background(), r, nil)
		}
	}()
	var once bool
	return func() {
		if !once {
			once = true
			close(done)
			<-stopped
			_ = cl.Flush(context.Background())
		}
	}
}

// markersCopied writes a marker to each of parts and returns how long after
// start the last one was on the destination; it logs when a tenth and half
// of them were.
func markersCopied(b *testing.B, w *world, src *kgo.Client, what string, parts []topicPartition, start time.Time, timeout time.Duration) time.Duration {
	ctx := context.Background()
	rs := make([]*kgo.Record, len(parts))
	for i, tp := range parts {
		rs[i] = &kgo.Record{Topic: tp.topic, Partition: tp.part, Value: []byte("marker")}
	}
	if err := src.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	// Every marker's offset is below its partition's end from here on.
	want := map[topicPartition]int64{}
	for _, r := range rs {
		want[topicPartition{r.Topic, r.Partition}] = r.Offset + 1
	}
	var topics []string
	seen := map[string]bool{}
	for _, tp := range parts {
		if !seen[tp.topic] {
			seen[tp.topic] = true
			topics = append(topics, tp.topic)
		}
	}
	dst, err := kgo.NewClient(kgo.SeedBrokers(w.clusters.DestinationAddr()))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	adm := kadm.NewClient(dst)
	var tenth, half time.Duration
	deadline := start.Add(timeout)
	for {
		got, err := adm.ListEndOffsets(ctx, topics...)
		arrived := 0
		for tp, end := range want {
			if o, ok := got.Lookup(tp.topic, tp.part); err == nil && ok && o.Err == nil && o.Offset >= end {
				arrived++
			}
		}
		if tenth == 0 && arrived*10 >= len(want) {
			tenth = time.Since(start)
		}
		if half == 0 && arrived*2 >= len(want) {
			half = time.Since(start)
		}
		if arrived == len(want) {
			all := time.Since(start)
			b.Logf("%s, %d partitions: markers on the destination, 10%% after %s, 50%% after %s, all after %s",
				what, len(want), tenth.Round(time.Millisecond), half.Round(time.Millisecond), all.Round(time.Millisecond))
			return all
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: %d of %d markers not on the destination %s after the signal", what, len(want)-arrived, len(want), timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// durableDatabase starts a PostgreSQL server of the benchmark's own, as
// durable as a production one (fsync, synchronous_commit and
// full_page_writes on), and returns the URL of an empty database on it
// (the first server migrates it) and its statement counts.
func durableDatabase(b *testing.B) (string, *pgStatements) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pgserver.Start(ctx, pgserver.Config{Settings: map[string]string{
		"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Stop() })
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, q := range []string{"SHOW fsync", "SHOW synchronous_commit", "SHOW full_page_writes"} {
		var v string
		if err := c.QueryRow(ctx, q).Scan(&v); err != nil || v != "on" {
			b.Fatalf("%s: %q, %v; want on", q, v, err)
		}
	}
	if _, err := c.Exec(ctx, "CREATE DATABASE kmirror"); err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, s.URL("kmirror"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	st := &pgStatements{pool: pool}
	if ok, err := testdb.EnableStatements(ctx, pool); !ok {
		b.Logf("statement counts off (pg_stat_statements not loaded): %v", err)
		st.pool = nil
	}
	return s.URL("kmirror"), st
}

// pgStatements reads pg_stat_statements on the benchmark's own server; a
// nil one, or one whose server has not the module, does nothing.
type pgStatements struct {
	pool *pgxpool.Pool
	at   time.Time
}

func (p *pgStatements) reset(b *testing.B) {
	if p == nil || p.pool == nil {
		return
	}
	if _, err := p.pool.Exec(context.Background(), "SELECT pg_stat_statements_reset()"); err != nil {
		b.Logf("pg_stat_statements_reset: %v", err)
	}
	p.at = time.Now()
}

// log logs the statements that took the most time since reset.
func (p *pgStatements) log(b *testing.B, what string) {
	if p == nil || p.pool == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := p.pool.Query(ctx, `SELECT calls, rows, total_exec_time, left(regexp_replace(query, '\s+', ' ', 'g'), 140)
		FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 12`)
	if err != nil {
		b.Logf("pg_stat_statements: %v", err)
		return
	}
	defer rs.Close()
	var out strings.Builder
	for rs.Next() {
		var calls, rows int64
		var ms float64
		var q string
		if err := rs.Scan(&calls, &rows, &ms, &q); err != nil {
			b.Logf("pg_stat_statements: %v", err)
			return
		}
		fmt.Fprintf(&out, "\n  %8.0f ms %6d calls %8d rows  %s", ms, calls, rows, q)
	}
	b.Logf("%s: statements by time over the %s since the signal:%s", what, time.Since(p.at).Round(time.Second), out.String())
}

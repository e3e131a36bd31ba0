package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
)

const (
	// loadReaders walk every page of GET /v1/partitions, loadActors pause
	// and resume a topic of their own: 50 clients, none waiting between
	// requests.
	loadReaders = 40
	loadActors  = 10
	// loadWindow is how long the clients run at least in each loaded round.
	loadWindow = 5 * time.Second
	// defaultDrainPairs is how many loaded drains are timed, each between
	// two idle ones, unless KMIRROR_BENCH_DRAIN_PAIRS says.
	defaultDrainPairs = 4
	// bulkPartitions are describe rows of a mirror whose topics are
	// stopped: rows to page through that no worker leases.
	bulkPartitions = 10_000
	// backlogRecords are produced to the bench topic (3 partitions) while
	// it is paused before each throughput measurement, unless
	// KMIRROR_BENCH_BACKLOG_RECORDS says.
	backlogRecords = 1_500_000
	backlogValue   = 100 // bytes
)

// BenchmarkControlPlaneUnderLoad: a full in-process server (API, engine,
// syncer, lease manager; Postgres from testdb; kfake clusters in a child
// process, the destination blackholed) mirrors
// topic bench (3 partitions) and ten topics ctl-00..ctl-09 (2 partitions
// each) of mirror m; mirror bulk adds 10,000 describe rows of stopped
// topics. Then, four times for 5 s or more, 50 clients run: 40 walk every
// page of GET /v1/partitions (default page size, 11 pages), and 10 each
// alternate POST topics:pause and topics:resume on a ctl topic of their own.
//
// It reports requests/s and the p50/p99 latency per operation (page,
// pause, resume), fails on any non-2xx answer (409s counted on their own)
// and on any walk that does not return every row once, and at the end
// checks that the state is consistent: each ctl topic's desired state is
// its client's last action, every partition settles in the matching state,
// none failed, and no row is missing, extra or orphaned.
//
// Mirroring throughput: before each drain, bench is paused,
// 1,500,000 records (random 100-byte values, uncompressed: the batch copy
// moves compressible zeros faster than a poll can time) are produced to
// its source and it is resumed; the destination's end offsets, polled
// every 5 ms, time the copy from its first record to its last. Nine
// drains alternate idle and loaded, idle first and last; each waits a
// second before the resume, a loaded one with the 50 clients running, and
// those run until the copy is done and 5 s have passed (20 s of load in
// all). The drop compares the medians.
//
// closed-loop sends each client's next request as soon as the last is
// answered: the most the instance serves. paced-1s sends one request a
// second per client, 50 requests/s in all (a console refresh of a
// 10,000-partition mirror is 11 pages), to see the cost at a steady load.
// closed-loop-server-limits is the closed loop against the server's
// default per-caller change limit (5 changes a second after a burst of 20;
// the others run with it off, to measure kmirror rather than the limiter):
// each actor calls from a loopback address of its own, so it is a caller
// of its own, and when answered 429 it waits as Retry-After says.
// KMIRROR_BENCH_DRAIN_PAIRS (default 4) sets how many loaded drains there
// are, KMIRROR_BENCH_BACKLOG_RECORDS (default 1,500,000) the records of
// each drain: a 1.5M drain lasts 0.3-0.8 s, and single ones swing 3-5x;
// 6,000,000 times the steady copy rather than its start.
//
// With -v it logs each drain's breakdown (control_plane_drains_test.go):
// when each partition of bench copied its first and last record, and the
// CPU of this process, the clusters' process, Postgres and the machine,
// and the machine's CPU pressure (PSI), over the drain and over the 800 ms
// before its resume (the load alone). For the profile of issue 28 item 7:
// KMIRROR_BENCH_BURN=<cores> loads the loaded drains with child processes
// that only burn that much CPU instead of the clients;
// KMIRROR_BENCH_TRACE=<dir> writes a runtime/trace of each drain there;
// KMIRROR_BENCH_PGSTATS=1 logs what Postgres did a second under the load
// (pg_stat_user_tables). Run with -benchtime=1x (one iteration whatever
// b.N):
//
//	go test ./cmd/kmirror -run '^$' -bench ControlPlaneUnderLoad -benchtime=1x
func BenchmarkControlPlaneUnderLoad(b *testing.B) {
	b.Run("closed-loop", func(b *testing.B) { benchControlPlane(b, 0, false) })
	b.Run("paced-1s", func(b *testing.B) { benchControlPlane(b, time.Second, false) })
	b.Run("closed-loop-server-limits", func(b *testing.B) { benchControlPlane(b, 0, true) })
}

// serverChangeRate and serverChangeBurst are the server's defaults
// (--api-change-rate, --api-change-burst).
const (
	serverChangeRate  = 5
	serverChangeBurst = 20
)

func benchControlPlane(b *testing.B, interval time.Duration, limits bool) {
	// The server logs to a file that outlives a failed run, to read when
	// a copy stalls.
	logFile, err := os.CreateTemp("", "kmirror-control-plane-*.log")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		logFile.Close()
		if !b.Failed() {
			os.Remove(logFile.Name())
		}
	})
	// The server's default lease TTL (15 s) and delivery timeout (4 s), not
	// the tests' short ones: this measures a deployment, and a copy at
	// full speed on 2 busy vCPUs can hold a batch longer than 1 s.
	// The clusters run in a child process and the destination keeps no
	// records (its offsets still advance): in this process, a drain is
	// kmirror's copy, not kfake storing 150 MB beside the API
	// (persistBatchToSegment was 38% of the process's CPU).
	clusters, err := devcluster.Start(devcluster.Config{Process: true, BlackholeDestination: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(clusters.Close)
	srcAdm := newAdmin(b, clusters.SourceAddr())
	actorTopics := make([]string, loadActors)
	for i := range actorTopics {
		actorTopics[i] = fmt.Sprintf("ctl-%02d", i)
	}
	createTopics(b, srcAdm, 3, "bench")
	createTopics(b, srcAdm, 2, actorTopics...)
	srv := startServerOn(b, slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo})), clusters,
		func(c *serverConfig) {
			c.LeaseTTL, c.LeaseRenewInterval, c.DeliveryTimeout = 15*time.Second, 5*time.Second, 4*time.Second
			if limits {
				c.ChangeRate, c.ChangeBurst = serverChangeRate, serverChangeBurst
			}
		})
	ctx := b.Context()
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * (loadReaders + loadActors)}}
	c := apiClient{tb: b, base: srv.base, http: hc}
	c.post("/v1/mirrors", fmt.Sprintf(`{"name":"m","source":{"bootstrap_servers":%q}}`, srv.clusters.SourceAddr()))
	c.post("/v1/mirrors/m/topics:add", `{"topic":"bench|ctl-.*"}`)
	mirrorParts := 3 + 2*loadActors
	want := map[string]string{"bench": "MIRRORING"}
	for _, t := range actorTopics {
		want[t] = "MIRRORING"
	}
	waitStates(b, hc, srv.base, want, mirrorParts, 60*time.Second)

	pool, err := pgxpool.New(ctx, srv.dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	for _, sql := range []string{
		// Unreachable and synced once a day: its metadata lease costs nothing.
		`INSERT INTO mirrors (name, bootstrap_servers, config)
			VALUES ('bulk', '127.0.0.1:1', '{"mirror.metadata.refresh.interval.ms": "86400000"}')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state)
			SELECT 'bulk', format('bulk-%s', lpad(g::text, 3, '0')), 'stopped' FROM generate_series(1, 100) g`,
		fmt.Sprintf(`INSERT INTO mirror_partitions (mirror, topic, partition, state, src_next, dst_next, source_end_offset, destination_end_offset)
			SELECT 'bulk', format('bulk-%%s', lpad(g::text, 3, '0')), p, 'STOPPED', 500, 500, 500, 500
			FROM generate_series(1, 100) g, generate_series(0, %d) p`, bulkPartitions/100-1),
		`ANALYZE mirror_partitions`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	totalRows := mirrorParts + bulkPartitions

	fill := newBacklogFiller(b, srv.clusters.SourceAddr(), srv.clusters.DestinationAddr())
	fill.records = envInt("KMIRROR_BENCH_BACKLOG_RECORDS", backlogRecords) / 3 * 3
	// Larger backlogs are deleted from the source after each drain: kfake
	// keeps every record in memory.
	fill.trim = fill.records != backlogRecords
	drains := &drainLog{tb: b}
	// KMIRROR_BENCH_BURN (cores, e.g. 0.6) loads the loaded drains with
	// child processes that only burn that much CPU instead of the 50
	// clients: what CPU alone takes from the copy.
	burn := envFloat("KMIRROR_BENCH_BURN", 0)
	// KMIRROR_BENCH_PGSTATS=1 logs what Postgres did a second under the
	// load, from a second of each loaded round after its drain.
	pgStats := os.Getenv("KMIRROR_BENCH_PGSTATS") != ""
	var pgLoaded [][2]tableStats
	load := &controlPlaneLoad{tb: b, c: c, actorTopics: actorTopics, totalRows: totalRows, interval: interval, limits: limits,
		walkers: make([]walker, loadReaders), latency: map[string][]time.Duration{}, lastDesired: map[string]string{}}
	// drain pauses bench, fills its backlog, resumes it and returns the
	// copy's records/s; loaded, the clients run from a second before the
	// resume until the copy is done and loadWindow has passed.
	drain := func(loaded bool) float64 {
		c.post("/v1/mirrors/m/topics:pause", `{"topic":"bench"}`)
		c.waitAll("PAUSED", 60*time.Second)
		srcEnd := fill.produce()
		// Every drain starts from a collected heap: the fill's garbage
		// otherwise lands in whichever drain the next cycle falls in.
		runtime.GC()
		var stop func()
		var window <-chan time.Time
		if loaded {
			window = time.After(loadWindow)
			if burn > 0 {
				stop = startBurner(b, burn)
			} else {
				stop = load.start()
			}
		}
		// Every client is running by now; idle drains wait as long, so
		// that neither starts while the fill's memory is still given back.
		// The CPU of the last 800 ms of it is the load's alone.
		time.Sleep(200 * time.Millisecond)
		cpuLoad := sampleCPU(srv.clusters)
		time.Sleep(800 * time.Millisecond)
		stopTrace := drainTrace(b, len(drains.drains)+1, loaded)
		cpu0 := sampleCPU(srv.clusters)
		resumed := time.Now()
		c.post("/v1/mirrors/m/topics:resume", `{"topic":"bench"}`)
		resumeTook := time.Since(resumed)
		timing, err := fill.awaitCopied(srcEnd, resumed, time.Minute)
		cpu1 := sampleCPU(srv.clusters)
		stopTrace()
		if err != nil {
			if stop != nil {
				stop()
			}
			b.Fatalf("%v\n%s\nserver log: %s\ngoroutines: %s", err, stallReport(b, pool), logFile.Name(), dumpGoroutines(b))
		}
		timing.resumeTook = resumeTook
		drains.add(loaded, timing, cpuLoad.to(cpu0), cpu0.to(cpu1))
		if loaded {
			<-window
			if pgStats {
				before := readTableStats(b, pool)
				time.Sleep(time.Second)
				pgLoaded = append(pgLoaded, [2]tableStats{before, readTableStats(b, pool)})
			}
			stop()
		}
		if fill.trim {
			fill.deleteCopied(srcEnd)
		}
		return timing.rate()
	}

	b.Logf("load average at the start: %s", loadAverage())
	b.ResetTimer()
	var idle, loaded []float64
	// Single drains swing 2-3x even idle: more pairs narrow the medians.
	drainPairs := envInt("KMIRROR_BENCH_DRAIN_PAIRS", defaultDrainPairs)
	for i := range 2*drainPairs + 1 {
		if i%2 == 1 {
			loaded = append(loaded, drain(true))
		} else {
			idle = append(idle, drain(false))
		}
	}
	b.StopTimer()
	b.Logf("load average at the end: %s", loadAverage())
	drains.summary()
	if len(pgLoaded) > 0 {
		logTableStats(b, pgLoaded[len(pgLoaded)/2][0], pgLoaded[len(pgLoaded)/2][1], 1)
	}

	checkSettled(b, hc, srv.base, pool, load.lastDesired, mirrorParts)

	b.ReportMetric(0, "ns/op")
	if burn > 0 {
		b.Logf("loaded drains burned %.2f cores instead of running the clients", burn)
		load.elapsed = time.Second // no requests: zero rates
		for _, op := range []string{"page", "pause", "resume"} {
			load.latency[op] = []time.Duration{0}
		}
	}
	b.Logf("control plane: %d readers and %d actors for %s in all; %d rows per walk", loadReaders, loadActors, load.elapsed.Round(time.Millisecond), totalRows)
	b.Logf("%-7s %8s %8s %8s %8s %8s", "op", "count", "req/s", "p50-ms", "p99-ms", "max-ms")
	total := 0
	for _, op := range []string{"page", "pause", "resume"} {
		d := load.latency[op]
		slices.Sort(d)
		total += len(d)
		rate := float64(len(d)) / load.elapsed.Seconds()
		p50, p99, mx := percentile(d, 0.50), percentile(d, 0.99), d[len(d)-1]
		b.ReportMetric(rate, op+"-req/s")
		b.ReportMetric(ms(p50), op+"-p50-ms")
		b.ReportMetric(ms(p99), op+"-p99-ms")
		b.Logf("%-7s %8d %8.1f %8.1f %8.1f %8.1f", op, len(d), rate, ms(p50), ms(p99), ms(mx))
	}
	b.ReportMetric(float64(total)/load.elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(load.conflicts), "409s")
	b.ReportMetric(float64(load.throttled), "429s")
	b.Logf("all: %.1f req/s; %d walks of every page; 409: %d; 429 (waited as told): %d; other non-2xx: %d",
		float64(total)/load.elapsed.Seconds(), load.walks, load.conflicts, load.throttled, len(load.failures))
	median := func(v []float64) float64 {
		v = slices.Sorted(slices.Values(v))
		return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
	}
	drop := 1 - median(loaded)/median(idle)
	b.ReportMetric(median(idle), "idle-records/s")
	b.ReportMetric(median(loaded), "loaded-records/s")
	b.ReportMetric(100*drop, "drop-%")
	thousands := func(v []float64) string {
		out := make([]string, len(v))
		for i, x := range v {
			out[i] = fmt.Sprintf("%.0fk", x/1000)
		}
		return strings.Join(out, " ")
	}
	b.Logf("mirroring %d records per drain, records/s: idle %s (median %.0fk), loaded %s (median %.0fk): drop %.1f%%",
		fill.records, thousands(idle), median(idle)/1000, thousands(loaded), median(loaded)/1000, 100*drop)
	if load.conflicts > 0 || len(load.failures) > 0 {
		b.Errorf("%d 409 answers and %d other failures under load, want none; first: %v", load.conflicts, len(load.failures),
			load.failures[:min(len(load.failures), 5)])
	}
}

// controlPlaneLoad runs the clients and keeps what they saw, across rounds.
type controlPlaneLoad struct {
	tb          testing.TB
	c           apiClient
	actorTopics []string
	totalRows   int
	// interval, when set, paces each client: one request per interval at
	// most. Zero is a closed loop: the next request as soon as the last
	// answer arrives.
	interval time.Duration
	// limits says the server limits each caller's changes: every actor
	// then calls from its own address and waits out a 429.
	limits bool

	walkers []walker // one per reader

	mu        sync.Mutex
	elapsed   time.Duration
	latency   map[string][]time.Duration // per operation: page, pause, resume
	walks     int
	conflicts int
	throttled int // 429 answers to actors, each waited out
	failures  []string
	// lastDesired is each actor topic's desired state after its last
	// successful action; the next action asks for the other one.
	lastDesired map[string]string
}

// record keeps one answer and says whether it was a success. A paced
// client then waits for the rest of its interval.
func (l *controlPlaneLoad) record(op string, took time.Duration, status int, body []byte) bool {
	if l.interval > 0 {
		defer time.Sleep(max(l.interval-took, 0))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case status/100 == 2:
		l.latency[op] = append(l.latency[op], took)
		return true
	case status == http.StatusConflict:
		l.conflicts++
	default:
		l.failures = append(l.failures, fmt.Sprintf("%s: %d %.200s", op, status, body))
	}
	return false
}

func (l *controlPlaneLoad) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, fmt.Sprintf(format, args...))
}

// start starts the 50 clients; the returned stop stops them and waits for
// their last requests.
func (l *controlPlaneLoad) start() (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	running := func() bool {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	var wg sync.WaitGroup
	for i := range loadReaders {
		w := &l.walkers[i]
		wg.Go(func() {
			for running() {
				l.walkPage(w)
			}
		})
	}
	for i, topic := range l.actorTopics {
		c := l.c
		if l.limits {
			c = l.actorClient(i)
		}
		wg.Go(func() {
			body := fmt.Sprintf(`{"topic":%q}`, topic)
			for running() {
				l.mu.Lock()
				op, desired := "pause", "paused"
				if l.lastDesired[topic] == "paused" {
					op, desired = "resume", "mirroring"
				}
				l.mu.Unlock()
				t0 := time.Now()
				status, header, out := c.doHeader(http.MethodPost, "/v1/mirrors/m/topics:"+op, body)
				if status == http.StatusTooManyRequests && l.limits {
					l.mu.Lock()
					l.throttled++
					l.mu.Unlock()
					secs, err := strconv.Atoi(header.Get("Retry-After"))
					if err != nil || secs < 1 {
						l.fail("%s: 429 with Retry-After %q", op, header.Get("Retry-After"))
						secs = 1
					}
					select {
					case <-time.After(time.Duration(secs) * time.Second):
					case <-done:
					}
					continue
				}
				if l.record(op, time.Since(t0), status, out) {
					l.mu.Lock()
					l.lastDesired[topic] = desired
					l.mu.Unlock()
				}
			}
		})
	}
	return func() {
		close(done)
		wg.Wait()
		l.mu.Lock()
		l.elapsed += time.Since(start)
		l.mu.Unlock()
	}
}

// actorClient is a client whose connections come from 127.0.0.(2+i), so
// that the server counts actor i as a caller of its own (callers without a
// token are told apart by address). Linux routes all of 127/8 to loopback.
func (l *controlPlaneLoad) actorClient(i int) apiClient {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}}
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 2}}
	return apiClient{tb: l.tb, base: l.c.base, http: hc}
}

// walker is a reader's walk over every page of GET /v1/partitions. A walk
// carries over from one loaded round to the next: paced at a page a
// second, a walk of 11 pages is longer than a round.
type walker struct {
	cursor string
	rows   int
}

// walkPage reads the walker's next page; after the last it checks that the
// walk returned every row once.
func (l *controlPlaneLoad) walkPage(w *walker) {
	path := "/v1/partitions"
	if w.cursor != "" {
		path += "?cursor=" + url.QueryEscape(w.cursor)
	}
	t0 := time.Now()
	status, body := l.c.do(http.MethodGet, path, "")
	if !l.record("page", time.Since(t0), status, body) {
		*w = walker{}
		return
	}
	n, next, err := skimPage(body)
	if err != nil {
		l.fail("page: %v", err)
		*w = walker{}
		return
	}
	w.rows += n
	if w.cursor = next; next != "" {
		return
	}
	if w.rows != l.totalRows {
		l.fail("a walk of every page returned %d rows, want %d", w.rows, l.totalRows)
	} else {
		l.mu.Lock()
		l.walks++
		l.mu.Unlock()
	}
	*w = walker{}
}

// skimPage counts a page's rows and finds its next_cursor without decoding
// it: the clients share the server's process and CPUs, so what they spend
// on JSON is taken from the instance being measured.
func skimPage(body []byte) (rows int, next string, err error) {
	if !bytes.Contains(body, []byte(`"partitions":`)) {
		return 0, "", fmt.Errorf("not a page: %.200s", body)
	}
	// Each row has one "mirror" key; names cannot hold a quote.
	rows = bytes.Count(body, []byte(`"mirror":`))
	if i := bytes.LastIndex(body, []byte(`"next_cursor":`)); i >= 0 {
		if err := json.NewDecoder(bytes.NewReader(body[i+len(`"next_cursor":`):])).Decode(&next); err != nil {
			return 0, "", fmt.Errorf("next_cursor: %w", err)
		}
	}
	return rows, next, nil
}

// loadAverage is /proc/loadavg's first three fields: how busy the shared
// machine was.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}

// checkSettled checks, once the clients have stopped, that each actor
// topic's desired state is the one its last action asked for, that every
// partition of mirror m reaches the matching state, and that the tables
// hold exactly the rows they should.
func checkSettled(b *testing.B, hc *http.Client, base string, pool *pgxpool.Pool, lastDesired map[string]string, mirrorParts int) {
	b.Helper()
	var topics struct {
		Topics []struct {
			Topic        string `json:"topic"`
			DesiredState string `json:"desired_state"`
		} `json:"topics"`
	}
	c := apiClient{tb: b, base: base, http: hc}
	status, body := c.do(http.MethodGet, "/v1/mirrors/m/topics", "")
	if status != http.StatusOK || json.Unmarshal(body, &topics) != nil {
		b.Fatalf("GET /v1/mirrors/m/topics: %d %.300s", status, body)
	}
	want := map[string]string{"bench": "MIRRORING"}
	for _, t := range topics.Topics {
		if d, ok := lastDesired[t.Topic]; ok && t.DesiredState != d {
			b.Errorf("topic %s: desired state %s, but the last successful action asked for %s", t.Topic, t.DesiredState, d)
		}
		if t.Topic != "bench" {
			want[t.Topic] = map[string]string{"paused": "PAUSED", "mirroring": "MIRRORING"}[t.DesiredState]
		}
	}
	waitStates(b, hc, base, want, mirrorParts, 60*time.Second)

	for _, q := range []struct{ what, sql string }{
		{"partitions without their topic", `SELECT count(*) FROM mirror_partitions p
			WHERE NOT EXISTS (SELECT FROM mirror_topics t WHERE t.mirror = p.mirror AND t.topic = p.topic)`},
		{"topics without their mirror", `SELECT count(*) FROM mirror_topics t WHERE NOT EXISTS (SELECT FROM mirrors m WHERE m.name = t.mirror)`},
		{"offset-map runs without their partition", `SELECT count(*) FROM offset_map_runs r WHERE NOT EXISTS (
			SELECT FROM mirror_partitions p WHERE (p.mirror, p.topic, p.partition) = (r.mirror, r.topic, r.partition))`},
		{"partitions of m that failed, carry an error or are not leased by the instance", `SELECT count(*) FROM mirror_partitions
			WHERE mirror = 'm' AND (state = 'FAILED' OR coalesce(error, '') <> '' OR lease_owner IS DISTINCT FROM 'bench')`},
		{"partitions of m beyond the source's (3 of bench, 2 of each ctl topic)", `SELECT count(*) FROM mirror_partitions
			WHERE mirror = 'm' AND NOT ((topic = 'bench' AND partition < 3) OR (topic LIKE 'ctl-%' AND partition < 2))`},
	} {
		var n int
		if err := pool.QueryRow(b.Context(), q.sql).Scan(&n); err != nil {
			b.Fatal(err)
		}
		if n != 0 {
			b.Errorf("%d %s", n, q.what)
		}
	}
	var n int
	if err := pool.QueryRow(b.Context(), `SELECT count(*) FROM mirror_partitions WHERE mirror = 'm'`).Scan(&n); err != nil || n != mirrorParts {
		b.Errorf("mirror m has %d partition rows (err %v), want %d", n, err, mirrorParts)
	}
}

// waitStates polls every page of GET /v1/partitions?mirror=m until there
// are n rows and each topic's partitions are all in want[topic].
func waitStates(b *testing.B, hc *http.Client, base string, want map[string]string, n int, timeout time.Duration) {
	b.Helper()
	c := apiClient{tb: b, base: base, http: hc}
	deadline := time.Now().Add(timeout)
	for {
		var wrong []string
		rows, cursor := 0, ""
		for {
			status, body := c.do(http.MethodGet, "/v1/partitions?mirror=m&cursor="+url.QueryEscape(cursor), "")
			var page struct {
				Partitions []struct {
					Topic     string `json:"topic"`
					Partition int    `json:"partition"`
					State     string `json:"state"`
				} `json:"partitions"`
				NextCursor string `json:"next_cursor"`
			}
			if status != http.StatusOK || json.Unmarshal(body, &page) != nil {
				b.Fatalf("GET /v1/partitions: %d %.300s", status, body)
			}
			for _, p := range page.Partitions {
				rows++
				if p.State != want[p.Topic] {
					wrong = append(wrong, fmt.Sprintf("%s/%d %s (want %s)", p.Topic, p.Partition, p.State, want[p.Topic]))
				}
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if rows == n && len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("after %s: %d rows of mirror m (want %d); not settled: %s", timeout, rows, n, strings.Join(wrong, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newAdmin is an admin client of the cluster at addr, closed by cleanup.
func newAdmin(tb testing.TB, addr string) *kadm.Client {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createTopics creates topics of the given partitions (replication 1).
func createTopics(tb testing.TB, adm *kadm.Client, partitions int32, topics ...string) {
	tb.Helper()
	res, err := adm.CreateTopics(context.Background(), partitions, 1, nil, topics...)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		tb.Fatalf("create %v: %v", topics, err)
	}
}

// backlogFiller produces backlogs to the source's bench topic and waits
// for the destination to hold them.
type backlogFiller struct {
	tb       testing.TB
	records  int  // per drain, a multiple of 3
	trim     bool // delete each backlog from the source once copied
	producer *kgo.Client
	src, dst *kadm.Client
	values   [][]byte
}

func newBacklogFiller(tb testing.TB, source, destination string) *backlogFiller {
	tb.Helper()
	f := &backlogFiller{tb: tb, values: make([][]byte, 4096)}
	for i := range f.values {
		f.values[i] = make([]byte, backlogValue)
		rand.Read(f.values[i])
	}
	var err error
	if f.producer, err = kgo.NewClient(kgo.SeedBrokers(source), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000),
		kgo.ProducerBatchCompression(kgo.NoCompression())); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(f.producer.Close)
	f.src, f.dst = newAdmin(tb, source), newAdmin(tb, destination)
	return f
}

// produce writes f.records round-robin over bench's 3 partitions and
// returns the source's end offsets.
func (f *backlogFiller) produce() map[int32]int64 {
	f.tb.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var firstErr error
	for i := range f.records {
		f.producer.Produce(ctx, &kgo.Record{Topic: "bench", Partition: int32(i % 3), Value: f.values[i%len(f.values)]}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := f.producer.Flush(ctx); err != nil {
		f.tb.Fatal(err)
	}
	if firstErr != nil {
		f.tb.Fatalf("produce the backlog: %v", firstErr)
	}
	return f.ends(f.src)
}

func (f *backlogFiller) ends(adm *kadm.Client) map[int32]int64 {
	f.tb.Helper()
	offs, err := adm.ListEndOffsets(context.Background(), "bench")
	if err != nil {
		f.tb.Fatal(err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// awaitCopied polls the destination until each partition of bench reaches
// the source's end offset. The copy's rate is the records/s from the first
// poll that saw progress to the last (drainTiming.rate), without the
// resume's round trip and the partitions' alignment before it; the times
// are counted from resumed, when the resume was sent.
func (f *backlogFiller) awaitCopied(srcEnd map[int32]int64, resumed time.Time, timeout time.Duration) (drainTiming, error) {
	f.tb.Helper()
	deadline := time.Now().Add(timeout)
	per := int64(f.records) / int64(len(srcEnd))
	t := drainTiming{records: int64(f.records), partStart: map[int32]time.Duration{}, partDone: map[int32]time.Duration{}}
	var firstAt time.Time
	for {
		dst := f.ends(f.dst)
		var n int64
		now := time.Now()
		for p, end := range srcEnd {
			got := per - max(end-dst[p], 0)
			n += got
			if _, ok := t.partStart[p]; !ok && got > 0 {
				t.partStart[p] = now.Sub(resumed)
			}
			if _, ok := t.partDone[p]; !ok && got == per {
				t.partDone[p] = now.Sub(resumed)
			}
		}
		if firstAt.IsZero() && n > 0 {
			firstAt, t.first, t.firstAt = now, n, now.Sub(resumed)
		}
		if n == t.records {
			t.lastAt = now.Sub(resumed)
			if now.Sub(firstAt) < 100*time.Millisecond {
				return t, errors.New("the backlog was copied within one poll: too small to time")
			}
			return t, nil
		}
		if now.After(deadline) {
			return t, fmt.Errorf("the copy stalled: the destination holds %v after %s, the source %v", dst, timeout, srcEnd)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deleteCopied deletes the source's records up to ends, so that kfake
// does not keep every larger backlog.
func (f *backlogFiller) deleteCopied(ends map[int32]int64) {
	f.tb.Helper()
	var offs kadm.Offsets
	for p, end := range ends {
		offs.Add(kadm.Offset{Topic: "bench", Partition: p, At: end})
	}
	res, err := f.src.DeleteRecords(context.Background(), offs)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		f.tb.Fatalf("delete the copied backlog: %v", err)
	}
}

// dumpGoroutines writes every goroutine's stack (the server runs in this
// process) to a file that outlives the run, and returns its name.
func dumpGoroutines(tb testing.TB) string {
	f, err := os.CreateTemp("", "kmirror-control-plane-goroutines-*.txt")
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		return err.Error()
	}
	return f.Name()
}

// stallReport is what Postgres says about bench: its partition rows and
// its last events.
func stallReport(tb testing.TB, pool *pgxpool.Pool) string {
	var out strings.Builder
	for _, q := range []string{
		`SELECT format('%s/%s state %s (previous %s) owner %s epoch %s src_next %s dst_next %s source end %s destination end %s error %s updated %s',
				topic, partition, coalesce(state, 'UNKNOWN'), coalesce(previous_state, '-'), coalesce(lease_owner, '-'), lease_epoch,
				src_next, dst_next, source_end_offset, destination_end_offset, coalesce(error, '-'), updated_at)
			FROM mirror_partitions WHERE mirror = 'm' AND topic = 'bench' ORDER BY partition`,
		`SELECT format('event %s %s %s %s/%s: %s', id, at, kind, topic, partition, message)
			FROM (SELECT * FROM events WHERE mirror = 'm' AND topic = 'bench' ORDER BY id DESC LIMIT 30) e ORDER BY id`,
	} {
		rows, err := pool.Query(context.Background(), q)
		if err != nil {
			tb.Logf("stall report: %v", err)
			continue
		}
		for rows.Next() {
			var line string
			if rows.Scan(&line) == nil {
				out.WriteString(line + "\n")
			}
		}
		rows.Close()
	}
	return out.String()
}

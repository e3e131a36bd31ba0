package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/testing/testdb"
)

// world is one end-to-end test's setting: its own database, a source and a
// destination kfake cluster in the test process (the children reach them
// over loopback TCP), the kmirror binary, and the servers it started.
type world struct {
	t          testing.TB
	bin        string
	dbURL      string
	pool       *pgxpool.Pool
	clusters   *devcluster.Clusters
	logDir     string
	rng        *rand.Rand
	mirror     string
	topic      string
	partitions int32
	lifetimes  int
	servers    []*serverProcess
	// args are flags added to every server's, after the test's own.
	args []string
	// failuresFrom, when set, is when the part of the test that must log
	// no partition failure begins (finish); zero: its start.
	failuresFrom time.Time
}

func newWorld(t testing.TB, topic string, partitions int32) *world {
	t.Helper()
	return newWorldOn(t, topic, partitions, testdb.New(t))
}

// newWorldOn is newWorld on the database at dbURL.
func newWorldOn(t testing.TB, topic string, partitions int32, dbURL string) *world {
	t.Helper()
	w := &world{t: t, bin: kmirrorBinary(t), mirror: "crash", topic: topic, partitions: partitions, dbURL: dbURL}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, w.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w.pool = pool
	clusters, err := devcluster.Start(devcluster.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clusters.Close)
	w.clusters = clusters
	if err := clusters.Source.CreateTopic(topic, partitions, nil); err != nil {
		t.Fatal(err)
	}

	w.logDir = t.TempDir()
	// Registered after TempDir, so it runs before the directory goes.
	// KMIRROR_E2E_KEEP_LOGS=1 keeps them after a pass too.
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("KMIRROR_E2E_KEEP_LOGS") == "1" {
			w.keepLogs()
		}
	})

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KMIRROR_E2E_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("KMIRROR_E2E_SEED: %v", err)
		}
	}
	t.Logf("random seed %d (set KMIRROR_E2E_SEED to repeat the kill schedule)", seed)
	w.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return w
}

// keepLogs copies the servers' logs out of the test's temporary directory.
func (w *world) keepLogs() {
	dst, err := os.MkdirTemp("", "kmirror-e2e-"+strings.ReplaceAll(w.t.Name(), "/", "_")+"-")
	if err != nil {
		w.t.Logf("keeping server logs: %v", err)
		return
	}
	entries, _ := os.ReadDir(w.logDir)
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(w.logDir, e.Name())); err == nil {
			_ = os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
		}
	}
	w.t.Logf("server logs kept in %s", dst)
}

// start runs a new server lifetime and waits until its API serves.
func (w *world) start(id string) (*serverProcess, string) {
	w.t.Helper()
	w.lifetimes++
	s := startServer(w.t, w.bin, w.logDir, w.lifetimes, id, w.dbURL, w.clusters.DestinationAddr(), w.args...)
	w.servers = append(w.servers, s)
	return s, s.waitReady(20 * time.Second)
}

// createMirror creates the mirror over the source cluster and adds the
// topic, through a server's REST API.
func (w *world) createMirror(api string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := apiCall(ctx, api, http.MethodPost, "/v1/mirrors", map[string]any{
		"name": w.mirror, "source": map[string]any{"bootstrap_servers": w.clusters.SourceAddr()},
	}, nil, http.StatusCreated); err != nil {
		w.t.Fatal(err)
	}
	var res struct {
		Topics []string `json:"topics"`
	}
	if err := apiCall(ctx, api, http.MethodPost, "/v1/mirrors/"+w.mirror+"/topics:add",
		map[string]any{"topic": w.topic}, &res, http.StatusOK); err != nil {
		w.t.Fatal(err)
	}
	if len(res.Topics) != 1 || res.Topics[0] != w.topic {
		w.t.Fatalf("topics:add answered %v, want [%s]", res.Topics, w.topic)
	}
}

// partitionRow is a mirror partition as stored in Postgres.
type partitionRow struct {
	partition        int32
	state, owner     string
	epoch            int64
	srcNext, dstNext *int64
	err              string
	retryable        bool
	lost             int64
}

func (w *world) rows() []partitionRow {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := w.pool.Query(ctx, `SELECT partition, coalesce(state, ''), coalesce(lease_owner, ''), lease_epoch,
			src_next, dst_next, coalesce(error, ''), retryable, lost_records
		FROM mirror_partitions WHERE mirror = $1 AND topic = $2 ORDER BY partition`, w.mirror, w.topic)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rs.Close()
	var out []partitionRow
	for rs.Next() {
		var r partitionRow
		if err := rs.Scan(&r.partition, &r.state, &r.owner, &r.epoch, &r.srcNext, &r.dstNext, &r.err, &r.retryable, &r.lost); err != nil {
			w.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		w.t.Fatal(err)
	}
	return out
}

func describeRows(rs []partitionRow) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "\n  p%d %s owner=%s epoch=%d src_next=%s dst_next=%s lost=%d", r.partition, cmpState(r.state),
			r.owner, r.epoch, optInt(r.srcNext), optInt(r.dstNext), r.lost)
		if r.err != "" {
			fmt.Fprintf(&b, " error=%q retryable=%t", r.err, r.retryable)
		}
	}
	return b.String()
}

func cmpState(s string) string {
	if s == "" {
		return "UNKNOWN"
	}
	return s
}

func optInt(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

// mirroringOwners counts the MIRRORING partitions by owner.
func (w *world) mirroringOwners() map[string]int {
	n := map[string]int{}
	for _, r := range w.rows() {
		if r.state == "MIRRORING" {
			n[r.owner]++
		}
	}
	return n
}

// noPermanentFailure fails the test as soon as a partition is FAILED for a
// cause that is not retried (a divergence): waiting would only time out.
func (w *world) noPermanentFailure() {
	w.t.Helper()
	for _, r := range w.rows() {
		if r.state == "FAILED" && !r.retryable {
			w.t.Fatalf("partition %d FAILED and will not be retried: %s%s", r.partition, r.err, describeRows(w.rows()))
		}
	}
}

// pickKillMode picks the moment a server is killed after: a random delay
// once it serves (20%), once it took its first partition lease (30%; often
// mid-alignment), or once one of its partitions reached MIRRORING (50%;
// records in flight past the last checkpoint).
func (w *world) pickKillMode() string {
	switch n := w.rng.IntN(10); {
	case n < 2:
		return "serving"
	case n < 5:
		return "leased"
	default:
		return "mirroring"
	}
}

// killAfter waits for the server to reach the moment mode names, then for a
// random 0.3–2s, then SIGKILLs it. It returns what happened, for the log.
func (w *world) killAfter(s *serverProcess, mode string) string {
	w.t.Helper()
	s.alive()
	describe := func() string { return describeRows(w.rows()) }
	reached := time.Now()
	switch mode {
	case "leased":
		s.waitEvent("partition lease", s.logs.leased, 30*time.Second, describe)
	case "mirroring":
		s.waitEvent("partition reaching MIRRORING", s.logs.mirroring, 30*time.Second, describe)
	}
	waited := time.Since(reached)
	delay := 300*time.Millisecond + time.Duration(w.rng.Int64N(int64(1700*time.Millisecond)))
	time.Sleep(delay) // the deliberate random kill moment
	s.alive()
	s.kill()
	w.noPermanentFailure()
	return fmt.Sprintf("killed %s %s after %s (waited %s for it)", s.id, mode, delay.Round(time.Millisecond), waited.Round(time.Millisecond))
}

// waitCaughtUp waits until every partition is MIRRORING with its
// checkpoint at the source's end, and the API reports lag 0.
func (w *world) waitCaughtUp(api func() string, srcEnd map[int32]int64, timeout time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rs := w.rows()
		done := len(rs) == int(w.partitions)
		for _, r := range rs {
			if r.state == "FAILED" && !r.retryable {
				w.t.Fatalf("partition %d FAILED and will not be retried: %s%s", r.partition, r.err, describeRows(rs))
			}
			if r.state != "MIRRORING" || r.srcNext == nil || *r.srcNext != srcEnd[r.partition] {
				done = false
			}
		}
		if done && w.apiLagZero(api()) {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("partitions did not catch up with the source end offsets %v within %s:%s", srcEnd, timeout, describeRows(rs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apiLagZero reports whether GET /v1/partitions shows every partition
// MIRRORING with lag 0.
func (w *world) apiLagZero(api string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var res struct {
		Partitions []struct {
			Partition int32  `json:"partition"`
			State     string `json:"state"`
			Lag       *int64 `json:"lag"`
		} `json:"partitions"`
	}
	if err := apiCall(ctx, api, http.MethodGet, "/v1/partitions?mirror="+w.mirror, nil, &res, http.StatusOK); err != nil {
		w.t.Logf("GET /v1/partitions: %v", err)
		return false
	}
	if len(res.Partitions) != int(w.partitions) {
		return false
	}
	for _, p := range res.Partitions {
		if p.State != "MIRRORING" || p.Lag == nil || *p.Lag != 0 {
			return false
		}
	}
	return true
}

// assertExactCopy compares the destination with the source record by
// record in every partition: same count, keys, values, headers and
// timestamps in the same order, so no gap and no duplicate. It also checks
// that the offset map translates every mirrored record to its copy, and
// returns the number of records compared.
func (w *world) assertExactCopy() int {
	w.t.Helper()
	total := 0
	for p := range w.partitions {
		src := readPartition(w.t, w.clusters.SourceAddr(), w.topic, p, true)
		dst := readPartition(w.t, w.clusters.DestinationAddr(), w.topic, p, false)
		if len(src) != len(dst) {
			w.t.Fatalf("%s/%d: destination is not an exact copy: %s", w.topic, p, describeMismatch(src, dst))
		}
		pairs := make(map[int64]int64, len(src))
		for i := range src {
			if d := recordDiff(src[i], dst[i]); d != "" {
				w.t.Fatalf("%s/%d: destination is not an exact copy: %s", w.topic, p, describeMismatch(src, dst))
			}
			pairs[src[i].Offset] = dst[i].Offset
		}
		w.assertOffsetMap(p, pairs)
		total += len(src)
	}
	return total
}

// assertOffsetMap checks the partition's offset-map runs against the
// source → destination pairs the comparison found: every run maps only
// real pairs, and together the runs cover every mirrored record.
func (w *world) assertOffsetMap(p int32, pairs map[int64]int64) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := w.pool.Query(ctx, `SELECT src_start, dst_start, count FROM offset_map_runs
		WHERE mirror = $1 AND topic = $2 AND partition = $3 ORDER BY src_start`, w.mirror, w.topic, p)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rs.Close()
	covered := make(map[int64]bool, len(pairs))
	type run struct{ src, dst, count int64 }
	var runs []run
	for rs.Next() {
		var s, d, n int64
		if err := rs.Scan(&s, &d, &n); err != nil {
			w.t.Fatal(err)
		}
		runs = append(runs, run{s, d, n})
		for j := range n {
			want, ok := pairs[s+j]
			if !ok || want != d+j {
				w.t.Fatalf("%s/%d: offset map run (src %d, dst %d, count %d) maps source offset %d to %d, but its copy is at %s",
					w.topic, p, s, d, n, s+j, d+j, pairDesc(want, ok))
			}
			covered[s+j] = true
		}
	}
	if err := rs.Err(); err != nil {
		w.t.Fatal(err)
	}
	if len(covered) == len(pairs) {
		return
	}
	var missing []int64
	for s := range pairs {
		if !covered[s] {
			missing = append(missing, s)
		}
	}
	slices.Sort(missing)
	// The runs around the first hole say where the map lost track.
	var near []string
	for _, r := range runs {
		if r.src+r.count >= missing[0]-10 && r.src <= missing[0]+10 || r.src > missing[0] && len(near) < 6 {
			near = append(near, fmt.Sprintf("(src %d, dst %d, count %d)", r.src, r.dst, r.count))
		}
	}
	w.t.Fatalf("%s/%d: offset map covers %d of %d mirrored records; %d missing, source offsets %d..%d among them (runs near the first: %s)",
		w.topic, p, len(covered), len(pairs), len(missing), missing[0], missing[len(missing)-1], strings.Join(near, " "))
}

func pairDesc(dst int64, ok bool) string {
	if !ok {
		return "nowhere (not a mirrored record)"
	}
	return strconv.FormatInt(dst, 10)
}

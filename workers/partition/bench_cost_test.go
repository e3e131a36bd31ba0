package partition_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/devenv/procstat"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/workers/statetopic"
	"kmirror/workers/workertest"
)

// The idle and scale benchmarks run their kfake clusters in a child
// process (devcluster.Config{Process: true}), so this process's CPU and
// memory are kmirror's own: the instance (engine, lease manager,
// heartbeat, notifier, syncer and relay when started) plus the
// benchmark's own few statements. Postgres runs in its own processes.

// costMeter measures what an instance costs over a window: this process's
// CPU, the kfake clusters' CPU (their process), and Postgres's commits,
// rows written per table and, where pg_stat_statements is loaded,
// statements.
type costMeter struct {
	b   *testing.B
	env *workertest.Env
	// pool is the benchmark's own, for its snapshots and queries, so they
	// do not queue on (or occupy) the instance's data pool, env.Pool.
	pool       *pgxpool.Pool
	statements bool
}

func newCostMeter(b *testing.B, env *workertest.Env) *costMeter {
	b.Helper()
	pool, err := repo.OpenWith(context.Background(), env.Pool.Config().ConnString(), repo.OpenParams{MaxConns: 3})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	ok, err := testdb.EnableStatements(context.Background(), pool)
	if err != nil {
		b.Fatal(err)
	}
	if !ok {
		b.Log("pg_stat_statements is not loaded on this server: statements are not counted, commits and rows are " +
			"(a server started by internal/devenv/pgserver, with KMIRROR_TEST_DATABASE_URL unset, has it)")
	}
	return &costMeter{b: b, env: env, pool: pool, statements: ok}
}

// cost is one window's figures.
type cost struct {
	kmirror float64 // cores: this process
	kfake   float64 // cores: the clusters' process; -1 when they run in this one
	pg      testdb.StatsRates
}

// start takes the first snapshot; the function it returns takes the second
// and computes the rates.
func (m *costMeter) start() func() cost {
	m.b.Helper()
	pg0 := m.stats()
	cpu0, kf0, t0 := selfCPU(m.b), kfakeCPU(m.b, m.env.Clusters.Process()), time.Now()
	return func() cost {
		m.b.Helper()
		cpu1, kf1, t1 := selfCPU(m.b), kfakeCPU(m.b, m.env.Clusters.Process()), time.Now()
		pg1 := m.stats()
		secs := t1.Sub(t0).Seconds()
		c := cost{kmirror: (cpu1 - cpu0).Seconds() / secs, kfake: -1, pg: pg1.Rates(pg0)}
		if kf0 >= 0 {
			c.kfake = (kf1 - kf0).Seconds() / secs
		}
		return c
	}
}

// measure sleeps through a window and returns its cost.
func (m *costMeter) measure(window time.Duration) cost {
	m.b.Helper()
	done := m.start()
	time.Sleep(window) // the measuring window itself
	return done()
}

func (m *costMeter) stats() testdb.Stats {
	m.b.Helper()
	s, err := testdb.ReadStats(context.Background(), m.pool, m.statements)
	if err != nil {
		m.b.Fatal(err)
	}
	return s
}

// kfakeCPU is the CPU the clusters' process p has used so far, or -1 when
// the clusters run in this process (p is nil).
func kfakeCPU(b *testing.B, p *devcluster.Process) time.Duration {
	if p == nil {
		return -1
	}
	d, err := p.CPU()
	if err != nil {
		b.Fatalf("kfake process CPU: %v", err)
	}
	return d
}

// String is one log line: CPU, then Postgres.
func (c cost) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kmirror %.3f cores", c.kmirror)
	if c.kfake >= 0 {
		fmt.Fprintf(&b, " (kfake %.3f more)", c.kfake)
	}
	fmt.Fprintf(&b, "; Postgres %.1f commits/s", c.pg.Commits)
	if c.pg.Statements != nil {
		fmt.Fprintf(&b, ", %.1f statements/s", c.pg.TotalStatements())
	}
	fmt.Fprintf(&b, ", %.1f rows written/s (%s)", c.pg.TotalRows(), c.pg.TableSummary())
	return b.String()
}

// statementsReport lists the busiest statements, or says why there are none.
func (c cost) statementsReport(n int) string {
	if c.pg.Statements == nil {
		return "  (no pg_stat_statements)\n"
	}
	return c.pg.TopStatements(n)
}

// selfCPU is the user and system CPU this process has used.
func selfCPU(b *testing.B) time.Duration {
	d, err := procstat.CPU(procstat.Self)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// selfMemory is this process's resident set, now and at its peak.
func selfMemory(b *testing.B) procstat.Memory {
	m, err := procstat.ReadMemory(procstat.Self)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// benchReport prints a multi-line report at once: b.Log keeps only ten lines
// of a benchmark's output, and only at its end.
func benchReport(b *testing.B, format string, args ...any) {
	fmt.Printf("    %s: %s\n", b.Name(), strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", "\n        "))
}

// profilePhase writes a CPU profile of one phase to
// $KMIRROR_BENCH_PROFILE_DIR/<name>.cpu when that is set (not with
// -cpuprofile, which profiles the whole run); stop ends it.
//
// It also samples where goroutines block and which mutexes they wait on,
// and writes both profiles at the phase's start and end
// (<name>.block.start, <name>.block, <name>.mutex.start, <name>.mutex):
// Go keeps them cumulative, so the phase is the difference,
// `go tool pprof -diff_base <name>.block.start <binary> <name>.block`.
func profilePhase(b *testing.B, name string) (stop func()) {
	dir := os.Getenv("KMIRROR_BENCH_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	write := func(profile, file string) {
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup(profile).WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	runtime.SetBlockProfileRate(int(10 * time.Microsecond)) // a sample per 10 µs blocked, on average
	runtime.SetMutexProfileFraction(10)
	write("block", name+".block.start")
	write("mutex", name+".mutex.start")
	f, err := os.Create(filepath.Join(dir, name+".cpu"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		write("block", name+".block")
		write("mutex", name+".mutex")
		runtime.SetBlockProfileRate(0)
		runtime.SetMutexProfileFraction(0)
	}
}

// goroutineProfile writes where every goroutine waits (pprof's debug=1
// text) to $KMIRROR_BENCH_PROFILE_DIR/name when that is set.
func goroutineProfile(b *testing.B, name string) {
	dir := os.Getenv("KMIRROR_BENCH_PROFILE_DIR")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 1); err != nil {
		b.Fatal(err)
	}
}

// startServerInstance runs an instance as the server does: the server's
// timings and pools, the metadata syncer at the server's default interval
// (30 s) and the __mirror_state relay, whose work (state changes, and
// checkpoints and offset maps every few seconds) is part of what mirroring
// costs. It stops with env (its TB's cleanups).
func startServerInstance(env *workertest.Env, id string) *workertest.Instance {
	env.TB.Helper()
	in := env.StartInstanceOpts(id, workertest.InstanceOpts{ProductionTimings: true, Sync: true,
		SyncInterval: 30 * time.Second})
	startRelay(env, in)
	return in
}

// startRelay runs the __mirror_state relay beside an instance, as the
// server does, until env's cleanups (or an earlier Stop).
func startRelay(env *workertest.Env, in *workertest.Instance) *statetopic.Relay {
	tb := env.TB
	tb.Helper()
	relay, err := statetopic.NewRelay(statetopic.RelayConfig{Pool: in.DataPool,
		Destination: workertest.Plain(env.Clusters.DestinationAddr()), Notifier: in.Notifier, Logger: workertest.Logger()})
	if err != nil {
		tb.Fatal(err)
	}
	if err := relay.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(relay.Stop)
	return relay
}

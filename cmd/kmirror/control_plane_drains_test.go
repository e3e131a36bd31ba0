package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/devenv/procstat"
)

// What BenchmarkControlPlaneUnderLoad records of each drain besides its
// rate: where the time from the resume to the last record went, per
// partition of bench, and the CPU each process and the machine used
// meanwhile. With -v it logs a line per drain and the medians of idle and
// loaded drains (without -v a benchmark's log is cut at 10 lines).

// drainTiming is one drain as the destination's end offsets showed it, the
// times counted from when the resume was sent.
type drainTiming struct {
	resumeTook time.Duration // the POST's answer
	// firstAt and lastAt are the first poll that saw progress and the one
	// that saw the last record; first is what that first poll saw.
	firstAt, lastAt time.Duration
	first           int64
	// partStart and partDone are each partition's first progress and its
	// last record.
	partStart, partDone map[int32]time.Duration
	records             int64
}

// rate is the benchmark's measure: records/s from the first poll that saw
// progress to the last.
func (d drainTiming) rate() float64 {
	return float64(d.records-d.first) / (d.lastAt - d.firstAt).Seconds()
}

// spread is how far apart the partitions started.
func (d drainTiming) spread() time.Duration {
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for _, s := range d.partStart {
		lo, hi = min(lo, s), max(hi, s)
	}
	return hi - lo
}

// partRate is the median of the partitions' own rates, each from its first
// progress to its last record.
func (d drainTiming) partRate() float64 {
	var v []float64
	for p, s := range d.partStart {
		if took := d.partDone[p] - s; took > 0 {
			v = append(v, float64(d.records)/float64(len(d.partStart))/took.Seconds())
		}
	}
	return medianOf(v)
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Sorted(slices.Values(v))
	return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
}

// cpuSample is the CPU used so far by this process (kmirror and the
// benchmark's clients), the clusters' child process, every postgres process
// (with the backends they reaped), and the whole machine (busy and total,
// all cores, from /proc/stat).
type cpuSample struct {
	at                      time.Time
	self, clusters, pg      time.Duration
	machineBusy, machineAll time.Duration
	// irq is the machine's interrupt time (irq and softirq: loopback
	// traffic's receiving, mostly), steal what the hypervisor gave others.
	irq, steal time.Duration
	// pressure is /proc/pressure/cpu's "some" total: how long at least
	// one task was ready to run and waited for a CPU.
	pressure time.Duration
}

func sampleCPU(clusters *devcluster.Clusters) cpuSample {
	s := cpuSample{at: time.Now()}
	s.self, _ = procstat.CPU(procstat.Self)
	if p := clusters.Process(); p != nil {
		s.clusters, _ = p.CPU()
	}
	s.pg, _, _ = procstat.CommandCPU("postgres")
	s.machineBusy, s.machineAll, s.irq, s.steal = machineCPU()
	s.pressure = cpuPressure()
	return s
}

// cpuPressure reads the "some" line's total (microseconds) of
// /proc/pressure/cpu (PSI); 0 without it.
func cpuPressure() time.Duration {
	raw, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	_, total, ok := strings.Cut(line, "total=")
	if !strings.HasPrefix(line, "some ") || !ok {
		return 0
	}
	us, _ := strconv.ParseInt(strings.TrimSpace(total), 10, 64)
	return time.Duration(us) * time.Microsecond
}

// machineCPU reads /proc/stat's first line: busy is every field but idle
// and iowait.
func machineCPU() (busy, all, irq, steal time.Duration) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, 0, 0
	}
	var ticks, idle, irqs, stolen int64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
		switch i {
		case 3, 4:
			idle += n
		case 5, 6:
			irqs += n
		case 7:
			stolen += n
		}
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * 10 * time.Millisecond }
	return tick(ticks - idle), tick(ticks), tick(irqs), tick(stolen)
}

// cpuWindow is the CPU used between two samples, in cores (CPU-seconds a
// second).
type cpuWindow struct {
	wall                               time.Duration
	self, clusters, pg, machine, cores float64
	// others is the machine's busy CPU that none of the three used (the
	// shared machine's other work, the kernel's), pressure the share of
	// the time some task waited for a CPU.
	others, pressure float64
	irq, steal       float64 // of others
}

func (a cpuSample) to(b cpuSample) cpuWindow {
	wall := b.at.Sub(a.at)
	per := func(d time.Duration) float64 { return d.Seconds() / wall.Seconds() }
	w := cpuWindow{wall: wall, self: per(b.self - a.self), clusters: per(b.clusters - a.clusters), pg: per(b.pg - a.pg),
		pressure: per(b.pressure - a.pressure), irq: per(b.irq - a.irq), steal: per(b.steal - a.steal)}
	if all := b.machineAll - a.machineAll; all > 0 {
		w.cores = float64(all) / float64(wall) // about the machine's cores
		w.machine = per(b.machineBusy - a.machineBusy)
		w.others = max(w.machine-w.self-w.clusters-w.pg, 0)
	}
	return w
}

// drainLog gathers every drain's record.
type drainLog struct {
	tb     testing.TB
	drains []drainRecord
}

type drainRecord struct {
	loaded bool
	t      drainTiming
	cpu    cpuWindow // from the resume to the last record
	// before is the second before the resume: the load alone (bench
	// paused, its backlog filled).
	before cpuWindow
}

func (l *drainLog) add(loaded bool, t drainTiming, before, cpu cpuWindow) {
	r := drainRecord{loaded: loaded, t: t, cpu: cpu, before: before}
	l.drains = append(l.drains, r)
	if !testing.Verbose() {
		return // a benchmark's log is cut at 10 lines without -v
	}
	kind := "idle"
	if loaded {
		kind = "loaded"
	}
	parts := make([]string, 0, len(t.partStart))
	for _, p := range slices.Sorted(mapKeys(t.partStart)) {
		parts = append(parts, fmt.Sprintf("p%d %d-%d", p, t.partStart[p].Milliseconds(), t.partDone[p].Milliseconds()))
	}
	l.tb.Logf("drain %2d %-6s %5.0fk rec/s; resume answered %4d ms, first record %4d ms, last %5d ms (ms from the resume: %s); "+
		"partition rate %5.0fk; cores: kmirror %.2f clusters %.2f postgres %.2f others %.2f (irq %.2f steal %.2f), machine %.2f of %.1f; CPU waited for %.0f%% of the time; the second before: kmirror %.2f clusters %.2f postgres %.2f others %.2f",
		len(l.drains), kind, t.rate()/1000, t.resumeTook.Milliseconds(), t.firstAt.Milliseconds(), t.lastAt.Milliseconds(),
		strings.Join(parts, ", "), t.partRate()/1000, cpu.self, cpu.clusters, cpu.pg, cpu.others, cpu.irq, cpu.steal, cpu.machine, cpu.cores, 100*cpu.pressure,
		before.self, before.clusters, before.pg, before.others)
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// summary logs the medians of idle and loaded drains side by side.
func (l *drainLog) summary() {
	if !testing.Verbose() {
		return
	}
	l.tb.Logf("%-28s %10s %10s", "median of drains", "idle", "loaded")
	row := func(name string, f func(drainRecord) float64, format string) {
		var idle, loaded []float64
		for _, d := range l.drains {
			if d.loaded {
				loaded = append(loaded, f(d))
			} else {
				idle = append(idle, f(d))
			}
		}
		l.tb.Logf("%-28s %10s %10s", name, fmt.Sprintf(format, medianOf(idle)), fmt.Sprintf(format, medianOf(loaded)))
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	row("rate, k records/s", func(d drainRecord) float64 { return d.t.rate() / 1000 }, "%.0f")
	row("partition rate, k records/s", func(d drainRecord) float64 { return d.t.partRate() / 1000 }, "%.0f")
	row("resume answered, ms", func(d drainRecord) float64 { return ms(d.t.resumeTook) }, "%.0f")
	row("first record, ms", func(d drainRecord) float64 { return ms(d.t.firstAt) }, "%.0f")
	row("partitions' start spread, ms", func(d drainRecord) float64 { return ms(d.t.spread()) }, "%.0f")
	row("last record, ms", func(d drainRecord) float64 { return ms(d.t.lastAt) }, "%.0f")
	row("cores: kmirror process", func(d drainRecord) float64 { return d.cpu.self }, "%.2f")
	row("cores: clusters' process", func(d drainRecord) float64 { return d.cpu.clusters }, "%.2f")
	row("cores: postgres", func(d drainRecord) float64 { return d.cpu.pg }, "%.2f")
	row("cores: others", func(d drainRecord) float64 { return d.cpu.others }, "%.2f")
	row("cores: of them irq", func(d drainRecord) float64 { return d.cpu.irq }, "%.2f")
	row("cores: machine busy", func(d drainRecord) float64 { return d.cpu.machine }, "%.2f")
	row("CPU waited for, % of time", func(d drainRecord) float64 { return 100 * d.cpu.pressure }, "%.0f")
	row("before the resume: kmirror", func(d drainRecord) float64 { return d.before.self }, "%.2f")
	row("before the resume: clusters", func(d drainRecord) float64 { return d.before.clusters }, "%.2f")
	row("before the resume: postgres", func(d drainRecord) float64 { return d.before.pg }, "%.2f")
	row("before the resume: others", func(d drainRecord) float64 { return d.before.others }, "%.2f")
	row("before the resume: CPU waited", func(d drainRecord) float64 { return 100 * d.before.pressure }, "%.0f")
}

// drainTrace, with KMIRROR_BENCH_TRACE set to a directory, writes a
// runtime/trace of each drain from its resume to its last record there;
// the returned func stops it.
func drainTrace(tb testing.TB, n int, loaded bool) func() {
	dir := os.Getenv("KMIRROR_BENCH_TRACE")
	if dir == "" {
		return func() {}
	}
	kind := "idle"
	if loaded {
		kind = "loaded"
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("drain-%02d-%s.trace", n, kind)))
	if err != nil {
		tb.Fatal(err)
	}
	if err := trace.Start(f); err != nil {
		tb.Fatal(err)
	}
	return func() {
		trace.Stop()
		f.Close()
	}
}

// burnerEnv, in a re-executed test binary, makes it burn that share of a
// core (burnIfChild).
const burnerEnv = "KMIRROR_BENCH_BURNER_CHILD"

// burnIfChild, in a child started by startBurner, spins for the share of
// every 10 ms its environment says and sleeps for the rest, on one thread,
// until its stdin closes.
func burnIfChild() {
	share, err := strconv.ParseFloat(os.Getenv(burnerEnv), 64)
	if err != nil {
		return
	}
	runtime.GOMAXPROCS(1)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	const period = 10 * time.Millisecond
	busy := time.Duration(share * float64(period))
	for {
		select {
		case <-done:
			os.Exit(0)
		default:
		}
		start := time.Now()
		for time.Since(start) < busy {
		}
		time.Sleep(period - busy)
	}
}

// startBurner starts child processes that together burn cores of CPU (a
// process per core or part of one), a load of CPU alone to compare the
// clients' with; stop ends them.
func startBurner(tb testing.TB, cores float64) (stop func()) {
	var cmds []*exec.Cmd
	var stdins []io.Closer
	for left := cores; left > 0.001; left-- {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%.3f", burnerEnv, min(left, 1)))
		in, err := cmd.StdinPipe()
		if err != nil {
			tb.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		cmds, stdins = append(cmds, cmd), append(stdins, in)
	}
	return func() {
		for i, cmd := range cmds {
			stdins[i].Close()
			_ = cmd.Wait()
		}
	}
}

// tableStats is pg_stat_user_tables and pg_stat_database of the server's
// database at one moment: what Postgres did for whom.
type tableStats struct {
	tables map[string][7]int64 // seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del
	db     [3]int64            // xact_commit, tup_returned, tup_fetched
}

func readTableStats(tb testing.TB, pool *pgxpool.Pool) tableStats {
	ctx := context.Background()
	// Stats reach the shared view at most once a second per backend.
	_, _ = pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
	s := tableStats{tables: map[string][7]int64{}}
	rows, err := pool.Query(ctx, `SELECT relname, seq_scan, seq_tup_read, coalesce(idx_scan, 0), coalesce(idx_tup_fetch, 0),
		n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables`)
	if err != nil {
		tb.Logf("pg_stat_user_tables: %v", err)
		return s
	}
	for rows.Next() {
		var name string
		var v [7]int64
		if rows.Scan(&name, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) == nil {
			s.tables[name] = v
		}
	}
	rows.Close()
	_ = pool.QueryRow(ctx, `SELECT xact_commit, tup_returned, tup_fetched FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&s.db[0], &s.db[1], &s.db[2])
	return s
}

// logTableStats logs, a second, what Postgres did between two reads.
func logTableStats(tb testing.TB, a, b tableStats, seconds float64) {
	tb.Logf("postgres, a second: %.0f commits, %.0f rows returned, %.0f fetched", float64(b.db[0]-a.db[0])/seconds,
		float64(b.db[1]-a.db[1])/seconds, float64(b.db[2]-a.db[2])/seconds)
	tb.Logf("%-24s %9s %12s %9s %12s %8s %8s %8s", "table, a second", "seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch", "ins", "upd", "del")
	for _, name := range slices.Sorted(mapKeys(b.tables)) {
		var d [7]float64
		any := false
		for i := range d {
			d[i] = float64(b.tables[name][i]-a.tables[name][i]) / seconds
			any = any || d[i] >= 0.5
		}
		if any {
			tb.Logf("%-24s %9.0f %12.0f %9.0f %12.0f %8.0f %8.0f %8.0f", name, d[0], d[1], d[2], d[3], d[4], d[5], d[6])
		}
	}
}

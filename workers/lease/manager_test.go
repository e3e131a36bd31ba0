package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/runtime/notifier"
	"kmirror/internal/runtime/testsignal"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

// Short timings keep the tests fast: trust window TTL − Margin = 1.4s,
// renewed every 200ms.
const (
	testTTL     = 2 * time.Second
	testRenew   = 200 * time.Millisecond
	testMargin  = 600 * time.Millisecond
	testTimeout = time.Second
)

// seedLeaseFixture creates three mirrors and 40 partitions, 30 of them
// active:
//
//	alpha/orders   mirroring  10 × UNKNOWN      active
//	alpha/payments paused     10 × PAUSED       active
//	beta/logs      stopped     5 × STOPPING     active (still stopping)
//	beta/clicks    mirroring   5 × MIRRORING    active
//	gamma/old      stopped     5 × STOPPED, 5 × UNKNOWN: not active
func seedLeaseFixture(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `
		INSERT INTO mirrors (name, bootstrap_servers) VALUES
			('alpha', 'src:9092'), ('beta', 'src:9092'), ('gamma', 'src:9092');
		INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES
			('alpha', 'orders', 'mirroring'), ('alpha', 'payments', 'paused'),
			('beta', 'logs', 'stopped'), ('beta', 'clicks', 'mirroring'),
			('gamma', 'old', 'stopped');
		INSERT INTO mirror_partitions (mirror, topic, partition, state)
			SELECT 'alpha', 'orders', g, NULL FROM generate_series(0, 9) g
			UNION ALL SELECT 'alpha', 'payments', g, 'PAUSED' FROM generate_series(0, 9) g
			UNION ALL SELECT 'beta', 'logs', g, 'STOPPING' FROM generate_series(0, 4) g
			UNION ALL SELECT 'beta', 'clicks', g, 'MIRRORING' FROM generate_series(0, 4) g
			UNION ALL SELECT 'gamma', 'old', g, CASE WHEN g < 5 THEN 'STOPPED' END FROM generate_series(0, 9) g`)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
}

const activeInFixture = 30

// runRegistry is shared by every fakeRunner in a test: it knows which
// runner runs each key, and records a start of a key another runner still
// runs — two workers on one partition, which leases exist to prevent.
type runRegistry struct {
	mu         sync.Mutex
	running    map[Key]string
	violations []string
}

func newRunRegistry(t *testing.T) *runRegistry {
	r := &runRegistry{running: map[Key]string{}}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, v := range r.violations {
			t.Error(v)
		}
	})
	return r
}

// fakeRunner is a PartitionRunner and MirrorRunner that only records what
// it runs. Mirror metadata leases use keys with only Mirror set.
type fakeRunner struct {
	name string
	reg  *runRegistry

	mu      sync.Mutex
	leases  map[Key]*Lease
	ctxs    map[Key]context.Context
	stopped []Key
	// unsettled partitions have writes in flight (PartitionSettler).
	unsettled map[Key]bool
	// delivery is what DeliveryTimeout says.
	delivery time.Duration
}

func (f *fakeRunner) DeliveryTimeout() time.Duration { return f.delivery }

func (f *fakeRunner) Settled(k Key) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.unsettled[k]
}

func (f *fakeRunner) setUnsettled(keys map[Key]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unsettled = keys
}

func newFakeRunner(name string, reg *runRegistry) *fakeRunner {
	return &fakeRunner{name: name, reg: reg, leases: map[Key]*Lease{}, ctxs: map[Key]context.Context{}}
}

func (f *fakeRunner) start(ctx context.Context, l *Lease) {
	f.reg.mu.Lock()
	if other, ok := f.reg.running[l.Key]; ok {
		f.reg.violations = append(f.reg.violations, fmt.Sprintf("%s started %s while %s still runs it", f.name, l, other))
	}
	if !l.Valid() {
		f.reg.violations = append(f.reg.violations, fmt.Sprintf("%s started %s with an invalid lease", f.name, l))
	}
	f.reg.running[l.Key] = f.name
	f.reg.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.leases[l.Key]; ok {
		f.reg.mu.Lock()
		f.reg.violations = append(f.reg.violations, fmt.Sprintf("%s started %s twice", f.name, l))
		f.reg.mu.Unlock()
	}
	f.leases[l.Key], f.ctxs[l.Key] = l, ctx
}

func (f *fakeRunner) stop(k Key) {
	f.mu.Lock()
	delete(f.leases, k)
	delete(f.ctxs, k)
	f.stopped = append(f.stopped, k)
	f.mu.Unlock()
	f.reg.mu.Lock()
	if f.reg.running[k] == f.name {
		delete(f.reg.running, k)
	}
	f.reg.mu.Unlock()
}

func (f *fakeRunner) StartPartition(ctx context.Context, l *Lease) { f.start(ctx, l) }
func (f *fakeRunner) StopPartition(k Key)                          { f.stop(k) }
func (f *fakeRunner) StartMirror(ctx context.Context, l *Lease)    { f.start(ctx, l) }
func (f *fakeRunner) StopMirror(mirror string)                     { f.stop(Key{Mirror: mirror}) }

// partitions returns the running partition leases by key.
func (f *fakeRunner) partitions() map[Key]*Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[Key]*Lease{}
	for k, l := range f.leases {
		if k.Topic != "" {
			out[k] = l
		}
	}
	return out
}

// mirrors returns how many mirror metadata leases are running.
func (f *fakeRunner) mirrors() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k := range f.leases {
		if k.Topic == "" {
			n++
		}
	}
	return n
}

func (f *fakeRunner) stoppedKeys() []Key {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.stopped)
}

// node is one simulated instance: its own pool, manager and runner.
type node struct {
	id     string
	pool   *pgxpool.Pool
	runner *fakeRunner
	mgr    *Manager
	notes  *notifier.Notifier
}

type nodeOpts struct {
	ttl, renew, margin time.Duration
	log                io.Writer // default t.Output()
}

func openPool(t testing.TB, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// startNode starts an instance's lease manager (which registers it) on
// its own pool, so closing that pool silences it, like a partitioned
// instance.
func startNode(t *testing.T, dbURL, id string, reg *runRegistry, o nodeOpts) *node {
	t.Helper()
	n := &node{id: id, pool: openPool(t, dbURL), runner: newFakeRunner(id, reg)}
	notes, err := notifier.New(notifier.Config{Listen: repo.Notifications(n.pool), Channels: repo.Channels})
	if err != nil {
		t.Fatal(err)
	}
	if err := notes.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	n.notes = notes
	mgr, err := NewManager(ManagerConfig{
		Pool: n.pool, InstanceID: id, Notifier: notes,
		TTL: o.ttl, RenewInterval: o.renew, Margin: o.margin, Timeout: testTimeout,
		Logger:     slog.New(slog.NewTextHandler(cmp.Or[io.Writer](o.log, t.Output()), &slog.HandlerOptions{Level: slog.LevelWarn})),
		Partitions: n.runner, Mirrors: n.runner,
	})
	if err != nil {
		t.Fatalf("new lease manager: %v", err)
	}
	mgr.TestSignals.Expired.Init()
	mgr.TestSignals.Lost.Init()
	mgr.TestSignals.HandedBack.Init()
	mgr.TestSignals.RenewFailed.Init()
	mgr.TestSignals.SessionRenewed.Init()
	n.mgr = mgr
	if err := mgr.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { mgr.Stop(); notes.Stop() }) // before the pool closes
	return n
}

var fastLeases = nodeOpts{ttl: testTTL, renew: testRenew, margin: testMargin}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitKeys waits until sig has been raised for every key in want (other
// keys may come too) and returns the keys seen.
func waitKeys(t *testing.T, sig *testsignal.Signal[Key], want []Key) map[Key]bool {
	t.Helper()
	seen := map[Key]bool{}
	for missing := len(want); missing > 0; {
		k := sig.WaitOrTimeout(t)
		if !seen[k] && slices.Contains(want, k) {
			missing--
		}
		seen[k] = true
	}
	return seen
}

// closed reports whether a lease's Done is closed now.
func closed(l *Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// waitShares waits until the nodes run all 30 active partitions and all 3
// mirrors between them, each node within one of an even share.
func waitShares(t *testing.T, timeout time.Duration, nodes ...*node) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("an even share over %d nodes", len(nodes)), func() (bool, string) {
		ok := true
		var parts, mirrors int
		var desc []string
		for _, n := range nodes {
			p, m := len(n.runner.partitions()), n.runner.mirrors()
			parts += p
			mirrors += m
			desc = append(desc, fmt.Sprintf("%s=%d/%d", n.id, p, m))
			if p < activeInFixture/len(nodes)-1 || p > ceilDiv(activeInFixture, len(nodes)) ||
				m > ceilDiv(3, len(nodes)) {
				ok = false
			}
		}
		return ok && parts == activeInFixture && mirrors == 3, strings.Join(desc, " ")
	})
}

type dbLease struct {
	owner string
	epoch int64
}

func dbPartitionLeases(t *testing.T, pool *pgxpool.Pool) map[Key]dbLease {
	t.Helper()
	rows, err := repo.PartitionsList(t.Context(), pool, repo.PartitionsListParams{})
	if err != nil {
		t.Fatalf("list partitions: %v", err)
	}
	out := map[Key]dbLease{}
	for _, p := range rows {
		out[Key{p.Mirror, p.Topic, p.Partition}] = dbLease{p.LeaseOwner, p.LeaseEpoch}
	}
	return out
}

func dbMirrorOwners(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT coalesce(meta_lease_owner, '') FROM mirrors ORDER BY name`)
	if err != nil {
		t.Fatalf("list mirror leases: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

func isActiveInFixture(k Key) bool {
	return !(k.Mirror == "gamma" && k.Topic == "old")
}

func TestLeaseManagerTakesAllActivePartitions(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	// A long renew interval, so only a lease-demand notification can
	// explain a prompt reaction below.
	slow := nodeOpts{ttl: 30 * time.Second, renew: 10 * time.Second, margin: 10 * time.Second}
	n := startNode(t, dbURL, "solo", newRunRegistry(t), slow)

	waitShares(t, 15*time.Second, n)
	for k, l := range n.runner.partitions() {
		if !isActiveInFixture(k) {
			t.Errorf("took inactive partition %s", k)
		}
		if l.Owner != "solo" || l.Epoch != 1 || !l.Valid() {
			t.Errorf("lease %s: owner %q epoch %d valid %v; want solo, 1, true", k, l.Owner, l.Epoch, l.Valid())
		}
		if d := time.Until(l.Deadline()); d <= 0 || d > slow.ttl-slow.margin {
			t.Errorf("lease %s: deadline in %s; want within (0, %s]", k, d, slow.ttl-slow.margin)
		}
	}
	for k, l := range dbPartitionLeases(t, admin) {
		if want := map[bool]string{true: "solo", false: ""}[isActiveInFixture(k)]; l.owner != want {
			t.Errorf("%s: db owner %q, want %q", k, l.owner, want)
		}
	}

	// beta/logs finishes stopping: its leases are handed back as soon as
	// the NOTIFY announcing it arrives.
	select {
	case <-n.notes.Listening():
	case <-time.After(5 * time.Second):
		t.Fatal("the notifier does not LISTEN")
	}
	logs := map[Key]*Lease{}
	for k, l := range n.runner.partitions() {
		if k.Mirror == "beta" && k.Topic == "logs" {
			logs[k] = l
		}
	}
	if _, err := admin.Exec(t.Context(), `UPDATE mirror_partitions SET state = 'STOPPED' WHERE mirror = 'beta' AND topic = 'logs'`); err != nil {
		t.Fatal(err)
	}
	waitKeys(t, &n.mgr.TestSignals.HandedBack, slices.Collect(maps.Keys(logs)))
	if held := len(n.runner.partitions()); held != 25 {
		t.Errorf("holding %d partitions after beta/logs was handed back, want 25", held)
	}
	// The hand-back stopped the worker, ended the lease, then released it
	// in the database.
	db := dbPartitionLeases(t, admin)
	for k, l := range logs {
		if !closed(l) || l.Valid() {
			t.Errorf("%s handed back but Done closed=%v, Valid=%v", k, closed(l), l.Valid())
		}
		if got := db[k]; got.owner != "" || got.epoch != 1 {
			t.Errorf("%s handed back but in the database %+v, want released at epoch 1", k, got)
		}
	}

	n.mgr.Stop()
	for k, l := range dbPartitionLeases(t, admin) {
		if l.owner != "" {
			t.Errorf("%s still owned by %q after Stop", k, l.owner)
		}
	}
	if owners := dbMirrorOwners(t, admin); slices.ContainsFunc(owners, func(o string) bool { return o != "" }) {
		t.Errorf("mirror metadata leases still owned after Stop: %q", owners)
	}
	if len(n.runner.partitions()) != 0 || n.runner.mirrors() != 0 {
		t.Error("workers still running after Stop")
	}
}

func TestLeaseManagersShareAndFailOver(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	reg := newRunRegistry(t)

	a := startNode(t, dbURL, "a", reg, fastLeases)
	waitShares(t, 15*time.Second, a)

	// Two instances join: a hands back 20 partitions and 2 mirrors.
	b := startNode(t, dbURL, "b", reg, fastLeases)
	c := startNode(t, dbURL, "c", reg, fastLeases)
	start := time.Now()
	waitShares(t, 10*time.Second, a, b, c)
	t.Logf("3 instances balanced in %s", time.Since(start).Round(time.Millisecond))

	// c crashes: nothing is released, so a and b wait for its leases to
	// expire with its session, then take everything.
	before := dbPartitionLeases(t, admin)
	cHeld := slices.Collect(maps.Keys(c.runner.partitions()))
	c.mgr.Crash()
	start = time.Now()
	waitShares(t, testTTL+10*testRenew+3*time.Second, a, b)
	t.Logf("survivors took over in %s (TTL %s)", time.Since(start).Round(time.Millisecond), testTTL)
	after := dbPartitionLeases(t, admin)
	for _, k := range cHeld {
		if after[k].owner == "c" || after[k].epoch <= before[k].epoch {
			t.Errorf("%s: was %+v, now %+v; want a new owner at a higher epoch", k, before[k], after[k])
		}
	}

	// c comes back under the same id: shares even out again.
	c2 := startNode(t, dbURL, "c", reg, fastLeases)
	start = time.Now()
	waitShares(t, 10*time.Second, a, b, c2)
	t.Logf("returning instance balanced in %s", time.Since(start).Round(time.Millisecond))
	for k, l := range c2.runner.partitions() {
		if l.Epoch <= before[k].epoch {
			t.Errorf("%s: returning c holds epoch %d, not above the crashed one's %d", k, l.Epoch, before[k].epoch)
		}
	}

	for _, n := range []*node{a, b, c2} {
		n.mgr.Stop()
	}
	for k, l := range dbPartitionLeases(t, admin) {
		if l.owner != "" {
			t.Errorf("%s still owned by %q after Stop", k, l.owner)
		}
	}
	if owners := dbMirrorOwners(t, admin); slices.ContainsFunc(owners, func(o string) bool { return o != "" }) {
		t.Errorf("mirror metadata leases still owned after Stop: %q", owners)
	}
}

func TestLeaseManagerStopsWorkerOfStolenLease(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	n := startNode(t, dbURL, "victim", newRunRegistry(t), fastLeases)
	waitShares(t, 15*time.Second, n)

	key := Key{"alpha", "orders", 3}
	n.runner.mu.Lock()
	l, ctx := n.runner.leases[key], n.runner.ctxs[key]
	n.runner.mu.Unlock()
	// The thief is another live instance (a session that does not expire
	// during the test) that took the lease at the next epoch.
	_, err := admin.Exec(t.Context(), `
		WITH thief AS (
			INSERT INTO instances (id, session_epoch, session_expires_at)
			VALUES ('thief', 1, now() + interval '1 hour'))
		UPDATE mirror_partitions
		SET lease_owner = 'thief', lease_epoch = lease_epoch + 1, lease_session = 1
		WHERE mirror = $1 AND topic = $2 AND partition = $3`, key.Mirror, key.Topic, key.Partition)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if lost := n.mgr.TestSignals.Lost.WaitOrTimeout(t); lost != key {
		t.Fatalf("lost %s, want the stolen %s", lost, key)
	}
	t.Logf("stolen lease's worker stopped after %s", time.Since(start).Round(time.Millisecond))
	if _, running := n.runner.partitions()[key]; running || !slices.Contains(n.runner.stoppedKeys(), key) {
		t.Errorf("stolen partition's worker: running=%v, stopped=%v", running, n.runner.stoppedKeys())
	}
	if l.Valid() || !closed(l) {
		t.Errorf("stolen lease: Valid=%v, Done closed=%v", l.Valid(), closed(l))
	}
	if cause := context.Cause(ctx); !errors.Is(cause, ErrLost) {
		t.Errorf("worker context cause = %v, want ErrLost", cause)
	}
	// With the thief counted, the victim's share is half; it never takes
	// the stolen lease back while the thief's session lives.
	waitFor(t, 5*time.Second, "the victim's share to halve", func() (bool, string) {
		held := len(n.runner.partitions())
		return held == activeInFixture/2, fmt.Sprint(held, " held")
	})
	if _, running := n.runner.partitions()[key]; running {
		t.Error("the victim took the stolen partition back")
	}
	if got := dbPartitionLeases(t, admin)[key]; got.owner != "thief" || got.epoch != l.Epoch+1 {
		t.Errorf("the thief's lease was touched: %+v", got)
	}
}

// A partitioned instance (its database unreachable) stops trusting its
// leases by its own clock, and stops its workers, before another instance
// can take them.
func TestLeaseManagerStepsDownWhenDatabaseUnreachable(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	reg := newRunRegistry(t)
	cut := startNode(t, dbURL, "cut", reg, fastLeases)
	peer := startNode(t, dbURL, "peer", reg, fastLeases)
	waitShares(t, 15*time.Second, cut, peer)

	leases := cut.runner.partitions()
	cut.pool.Close() // renewals now fail
	cutAt := time.Now()

	// The leases expire at their deadline, by the local clock alone, and
	// then their workers stop.
	keys := slices.Collect(maps.Keys(leases))
	waitKeys(t, &cut.mgr.TestSignals.Expired, keys)
	t.Logf("leases lapsed %s after the database became unreachable (trust window %s)",
		time.Since(cutAt).Round(time.Millisecond), testTTL-testMargin)
	for k, l := range leases {
		if time.Now().Before(l.Deadline()) {
			t.Errorf("%s expired before its deadline", k)
		}
		if l.Valid() || !closed(l) {
			t.Errorf("%s expired but Valid=%v, Done closed=%v", k, l.Valid(), closed(l))
		}
	}
	waitKeys(t, &cut.mgr.TestSignals.Lost, keys)
	if held := len(cut.runner.partitions()); held != 0 {
		t.Errorf("%d partition workers still running after their leases were lost", held)
	}
	waitFor(t, 5*time.Second, "the cut instance's mirror syncs to stop", func() (bool, string) {
		return cut.runner.mirrors() == 0, fmt.Sprint(cut.runner.mirrors(), " running")
	})

	// The peer takes everything over once the leases expire in the
	// database; the registry fails the test if it started a partition the
	// cut instance still ran.
	waitShares(t, testTTL+10*testRenew+3*time.Second, peer)
	t.Logf("peer took over %s after the cut", time.Since(cutAt).Round(time.Millisecond))

	done := make(chan struct{})
	go func() { cut.mgr.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * testTimeout):
		t.Fatal("Stop hung with the database unreachable")
	}
}

// Partition rows locked by other writers (checkpoint saves, end offsets, an
// operator's transaction) do not delay lease renewal: the session is one
// row of instances, and which leases it holds is read without locks. This
// is what kept a busy instance from losing every lease at once.
func TestLeaseManagerHoldsWhilePartitionRowsAreLocked(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	n := startNode(t, dbURL, "busy", newRunRegistry(t), fastLeases)
	waitShares(t, 15*time.Second, n)
	leases := n.runner.partitions()

	tx, err := admin.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM mirror_partitions FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// Renewals go on for twice the trust window with every partition row
	// locked (counting a few more, since some may predate the lock).
	locked := time.Now()
	renewals := 0
	for time.Since(locked) < 2*(testTTL-testMargin) || renewals < 3 {
		n.mgr.TestSignals.SessionRenewed.WaitOrTimeout(t)
		renewals++
	}
	n.mgr.TestSignals.Expired.RequireEmpty(t)
	n.mgr.TestSignals.Lost.RequireEmpty(t)
	for k, l := range leases {
		if !l.Valid() {
			t.Errorf("%s no longer valid while only partition rows were locked", k)
		}
	}
	t.Logf("%d session renewals in %s with every partition row locked", renewals, time.Since(locked).Round(time.Millisecond))
}

// A database that hangs instead of failing: the renew statement times out
// with an error that names it, and the leases lapse at their deadline even
// while the loop is still waiting on the statement.
func TestLeaseManagerStepsDownWhenDatabaseHangs(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	n := startNode(t, dbURL, "stuck", newRunRegistry(t), fastLeases)
	waitShares(t, 15*time.Second, n)
	leases := n.runner.partitions()

	tx, err := admin.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	// The session row is what a renewal writes: lock it and renewals hang.
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM instances WHERE id = 'stuck' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	// Every lease lapses at the deadline its last renewal (before the lock)
	// gave it, while renewals hang: no deadline moved past the lock.
	keys := slices.Collect(maps.Keys(leases))
	waitKeys(t, &n.mgr.TestSignals.Expired, keys)
	for k, l := range leases {
		if l.Deadline().After(locked.Add(testTTL - testMargin)) {
			t.Errorf("%s: deadline %s moved past the lock + trust window", k, l.Deadline().Sub(locked))
		}
		if l.Valid() || !closed(l) {
			t.Errorf("%s expired but Valid=%v, Done closed=%v", k, l.Valid(), closed(l))
		}
	}
	// The hanging renewal fails with an error that names it.
	for {
		err := n.mgr.TestSignals.RenewFailed.WaitOrTimeout(t)
		if strings.Contains(err.Error(), "lease session renew timed out after 1s") {
			break
		}
		t.Logf("renewal failed: %v", err)
	}
	waitKeys(t, &n.mgr.TestSignals.Lost, keys)
	if held := len(n.runner.partitions()); held != 0 {
		t.Errorf("%d partition workers still running after their leases were lost", held)
	}

	// Once the database answers again the leases are released, then taken
	// again at the next epoch.
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitShares(t, 15*time.Second, n)
	for k, l := range n.runner.partitions() {
		if l.Epoch != 2 {
			t.Errorf("%s re-taken at epoch %d, want 2", k, l.Epoch)
		}
	}
}

func TestLeaseManagerConfig(t *testing.T) {
	pool := &pgxpool.Pool{}
	r := newFakeRunner("x", &runRegistry{running: map[Key]string{}})
	m, err := NewManager(ManagerConfig{Pool: pool, InstanceID: "i", Partitions: r})
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if c := m.cfg; c.TTL != 15*time.Second || c.RenewInterval != 5*time.Second || c.Margin != 5*time.Second ||
		c.Timeout != 5*time.Second || c.MinPassInterval != 100*time.Millisecond {
		t.Errorf("defaults = %+v", c)
	}
	// The server's defaults: TTL 15 s, margin 5 s, delivery 3.75 s,
	// grace 60 s.
	shipped := newFakeRunner("shipped", &runRegistry{running: map[Key]string{}})
	shipped.delivery = 3750 * time.Millisecond
	if _, err := NewManager(ManagerConfig{Pool: pool, InstanceID: "i", Partitions: shipped, OutageGrace: time.Minute}); err != nil {
		t.Errorf("the server's defaults: %v", err)
	}
	slow := newFakeRunner("slow", &runRegistry{running: map[Key]string{}})
	slow.delivery = 5 * time.Second
	for name, cfg := range map[string]ManagerConfig{
		"delivery as long as the margin": {Pool: pool, InstanceID: "i", Partitions: slow},
		"no pool":                        {InstanceID: "i", Partitions: r},
		"no id":                          {Pool: pool, Partitions: r},
		"margin over ttl":                {Pool: pool, InstanceID: "i", Partitions: r, TTL: time.Second, Margin: 2 * time.Second},
		"renew too slow":                 {Pool: pool, InstanceID: "i", Partitions: r, TTL: 3 * time.Second, Margin: time.Second, RenewInterval: 2 * time.Second},
		"negative timeout":               {Pool: pool, InstanceID: "i", Partitions: r, Timeout: -time.Second},
	} {
		if _, err := NewManager(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestLeaseManagerSessionOnly: a manager with no runner (an instance that
// runs only the control plane) keeps the instance's session and nothing
// else: it is listed live, takes no lease, and is not counted when leases
// are shared, so the one instance that mirrors holds them all. Stopped, it
// is listed stopped at once. And a mirror's metadata lease hangs on its
// owner's session: when the session is closed, the lease is free.
func TestLeaseManagerSessionOnly(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	reg := newRunRegistry(t)
	ctl, err := NewManager(ManagerConfig{Pool: openPool(t, dbURL), InstanceID: "ctl", Hostname: "h", Version: "v",
		TTL: testTTL, RenewInterval: testRenew, Margin: testMargin, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.Stop)
	a := startNode(t, dbURL, "a", reg, fastLeases)
	waitShares(t, 15*time.Second, a)
	instances := func() map[string]repo.Instance {
		list, err := repo.InstancesList(t.Context(), admin)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]repo.Instance{}
		for _, in := range list {
			out[in.ID] = in
		}
		return out
	}
	waitFor(t, 5*time.Second, "ctl listed live, taking no lease", func() (bool, string) {
		in := instances()["ctl"]
		return in.Live && !in.TakesLeases && in.Leases == 0 && in.Hostname == "h", fmt.Sprintf("%+v", in)
	})
	if in := instances()["a"]; !in.Live || !in.TakesLeases || in.Leases != activeInFixture {
		t.Errorf("a: %+v, want live, taking leases, holding all %d", in, activeInFixture)
	}
	ctl.Stop()
	if in := instances()["ctl"]; in.Live || in.StoppedAt == nil {
		t.Errorf("ctl after Stop: %+v, want stopped and not live", in)
	}
	var held int
	if err := admin.QueryRow(t.Context(), `SELECT count(*) FROM mirrors WHERE meta_lease_owner = 'a'
		AND meta_lease_session IS NOT NULL`).Scan(&held); err != nil || held != 3 {
		t.Fatalf("a holds %d metadata leases on its session (%v), want 3", held, err)
	}
	a.mgr.Stop()
	if err := admin.QueryRow(t.Context(), `SELECT count(*) FROM mirrors m WHERE `+
		`EXISTS (SELECT 1 FROM instances i WHERE i.id = m.meta_lease_owner AND i.session_epoch = m.meta_lease_session
			AND i.session_expires_at > now())`).Scan(&held); err != nil || held != 0 {
		t.Errorf("%d metadata leases still held after a stopped (%v), want 0", held, err)
	}
}

// TestLeaseManagerTakesHandedBackLeasesAtOnce: with the server's timings
// (a pass every 5 s), the leases of an instance that stops gracefully are
// taken by the other within 2 s: the release and the closed session NOTIFY
// lease demand (migration 000008) instead of waiting for the next pass.
func TestLeaseManagerTakesHandedBackLeasesAtOnce(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	reg := newRunRegistry(t)
	slow := serverLeases

	a := startNode(t, dbURL, "a", reg, slow)
	// Three rounds: a take-over that happens to meet a's periodic pass
	// must not pass for a prompt one.
	for round := range 3 {
		b := startNode(t, dbURL, fmt.Sprint("b", round), reg, slow)
		waitShares(t, 45*time.Second, a, b)
		waitListening(t, a, b)
		start := time.Now()
		b.mgr.Stop()
		waitShares(t, 2*time.Second, a)
		t.Logf("round %d: a took %s's leases %s after it stopped (passes every %s)", round, b.id, time.Since(start).Round(time.Millisecond), slow.renew)
	}
}

// TestLeaseManagerHoldsUnsettledHandBacks: a partition handed back while its
// worker's writes are still in flight (PartitionSettler says not settled)
// stays this instance's in the database, alive with its session, so no
// other instance takes it; once settled it is released at the next pass.
func TestLeaseManagerHoldsUnsettledHandBacks(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	reg := newRunRegistry(t)
	a := startNode(t, dbURL, "a", reg, fastLeases)
	waitShares(t, 30*time.Second, a)
	unsettled := map[Key]bool{}
	for k := range a.runner.partitions() {
		unsettled[k] = true
	}
	a.runner.setUnsettled(unsettled)

	b := startNode(t, dbURL, "b", reg, fastLeases)
	// a hands back half of its partitions: their workers stop, but the
	// rows stay a's, through several renewals.
	waitFor(t, 30*time.Second, "a to hand back its excess", func() (bool, string) {
		n := len(a.runner.partitions())
		return n <= ceilDiv(activeInFixture, 2), fmt.Sprint(n, " running on a")
	})
	deadline := time.Now().Add(3 * testTTL)
	for time.Now().Before(deadline) {
		if n := len(b.runner.partitions()); n > 0 {
			t.Fatalf("b took %d partitions whose writes on a were in flight", n)
		}
		owned := 0
		for _, l := range dbPartitionLeases(t, admin) {
			if l.owner == "a" {
				owned++
			}
		}
		if owned != activeInFixture {
			t.Fatalf("the database gives a %d partitions while all %d are unsettled", owned, activeInFixture)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Settled: released, and b takes its share.
	a.runner.setUnsettled(nil)
	waitShares(t, 30*time.Second, a, b)
}

// TestLeaseManagerRegisterWaitsOutAStall: the instances table is locked for
// one and a half statement timeouts (within the TTL) when an instance
// starts, as a database that stalls for a moment would be. Start tries
// again rather than failing, and returns once the lock is gone, with the
// instance registered. A manager that gave up
// after one statement timeout failed CI's busiest test runs with "register
// instance: database unavailable".
func TestLeaseManagerRegisterWaitsOutAStall(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	tx, err := admin.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `LOCK TABLE instances IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	held := testTimeout * 3 / 2
	time.AfterFunc(held, func() { _ = tx.Rollback(context.Background()) })
	m, err := NewManager(ManagerConfig{Pool: openPool(t, dbURL), InstanceID: "slow", Hostname: "h", Version: "v",
		TTL: testTTL, RenewInterval: testRenew, Margin: testMargin, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("start with the instances table locked for %s: %v", held, err)
	}
	t.Cleanup(m.Stop)
	if took := time.Since(start); took < held-100*time.Millisecond {
		t.Errorf("start returned after %s, before the lock (%s) was released", took, held)
	}
	list, err := repo.InstancesList(t.Context(), admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "slow" || list[0].StoppedAt != nil {
		t.Errorf("instances after start: %+v, want slow registered", list)
	}
}

// TestLeaseManagerStoppingInstanceLeavesTheShareFirst: an instance that
// stops gracefully is out of the fair share as soon as it begins, so the
// others take each lease it releases at once. Here one of b's partitions
// still has writes in flight, so b cannot close its session and leaves it
// to expire (15 s); a takes every other partition within 2 s regardless.
// Counted in the share until its session ended, b left a with half of
// them until the expiry.
func TestLeaseManagerStoppingInstanceLeavesTheShareFirst(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	reg := newRunRegistry(t)
	slow := serverLeases
	a := startNode(t, dbURL, "a", reg, slow)
	b := startNode(t, dbURL, "b", reg, slow)
	waitShares(t, 45*time.Second, a, b)
	waitListening(t, a, b)
	var stuck Key
	for k := range b.runner.partitions() {
		stuck = k
		break
	}
	b.runner.setUnsettled(map[Key]bool{stuck: true})
	start := time.Now()
	stopped := make(chan struct{})
	go func() { // it waits for the write in flight as long as it may
		defer close(stopped)
		b.mgr.Stop()
	}()
	defer func() { <-stopped }()
	waitFor(t, 2*time.Second, "a to take every partition but the one still in flight on b", func() (bool, string) {
		n := len(a.runner.partitions())
		return n == activeInFixture-1, fmt.Sprint(n, " running on a")
	})
	t.Logf("a ran %d partitions %s after b began to stop", activeInFixture-1, time.Since(start).Round(time.Millisecond))
	if a.runner.partitions()[stuck] != nil {
		t.Fatalf("a took %s, whose writes on b were in flight", stuck)
	}
}

// serverLeases are the server's default lease timings: a pass every 5 s.
var serverLeases = nodeOpts{ttl: 15 * time.Second, renew: 5 * time.Second, margin: 5 * time.Second}

// waitListening waits until each node's notifier LISTENs, so that a
// NOTIFY is heard rather than found by a later pass.
func waitListening(t *testing.T, nodes ...*node) {
	t.Helper()
	for _, n := range nodes {
		select {
		case <-n.notes.Listening():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the notifier does not LISTEN", n.id)
		}
	}
}

// TestLeaseManagerTakesACrashedInstancesLeasesAtItsExpiry: a crashed
// instance's leases are free when its session expires, and the survivor
// takes them then, not at its next periodic pass (up to a RenewInterval,
// 3.5 s here, later). Two crashes, so that a pass that happens to fall
// just after the expiry does not pass for it.
func TestLeaseManagerTakesACrashedInstancesLeasesAtItsExpiry(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	reg := newRunRegistry(t)
	slow := nodeOpts{ttl: 6 * time.Second, renew: 3500 * time.Millisecond, margin: 2 * time.Second}
	a := startNode(t, dbURL, "a", reg, slow)
	for round := range 2 {
		b := startNode(t, dbURL, fmt.Sprint("b", round), reg, slow)
		waitShares(t, 45*time.Second, a, b)
		b.mgr.Crash()
		var expiresIn time.Duration
		if err := admin.QueryRow(t.Context(), `SELECT extract(epoch FROM session_expires_at - now())::float8 * 1e9
			FROM instances WHERE id = $1`, b.id).Scan(&expiresIn); err != nil {
			t.Fatal(err)
		}
		expiresAt := time.Now().Add(expiresIn)
		waitShares(t, slow.ttl+2*slow.renew, a)
		late := time.Since(expiresAt)
		t.Logf("round %d: a took %s's leases %s after its session expired", round, b.id, late.Round(time.Millisecond))
		if late > 500*time.Millisecond {
			t.Fatalf("round %d: a took the crashed instance's leases %s after its session expired, want at once", round, late)
		}
	}
}

// TestLeaseManagerRestartUnderItsIDTakesAtOnce: of three instances, one
// crashes and is started again at once under the same id: its new session
// replaces the old one, whose leases are then free, and it holds its share
// again within a renew interval, not a TTL. (Under a new id, the default,
// e2e's TestFastRestartDoesNotSlowTakeover.)
func TestLeaseManagerRestartUnderItsIDTakesAtOnce(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	reg := newRunRegistry(t)
	opts := nodeOpts{ttl: 6 * time.Second, renew: 2 * time.Second, margin: 2 * time.Second}
	a := startNode(t, dbURL, "a", reg, opts)
	b := startNode(t, dbURL, "b", reg, opts)
	c := startNode(t, dbURL, "c", reg, opts)
	waitShares(t, 45*time.Second, a, b, c)
	c.mgr.Crash()
	crashed := time.Now()
	c2 := startNode(t, dbURL, "c", reg, opts)
	waitShares(t, time.Minute, a, b, c2)
	took := time.Since(crashed)
	t.Logf("every partition held again %s after the crash", took.Round(time.Millisecond))
	if took > opts.renew {
		t.Errorf("every partition held again %s after the crash and restart, want within %s (a renew interval)", took.Round(time.Millisecond), opts.renew)
	}
}

// A deleted mirror's leases end without a warning: the renewal no longer
// finds them because their rows are gone, which is what a delete does, not
// a lease taken by another owner (TestLeaseManagerStopsWorkerOfStolenLease
// still warns of that one).
func TestLeaseManagerDeletedMirrorIsNoWarning(t *testing.T) {
	dbURL := testdb.New(t)
	admin := openPool(t, dbURL)
	seedLeaseFixture(t, admin)
	var log syncBuffer
	opts := fastLeases
	opts.log = &log
	n := startNode(t, dbURL, "only", newRunRegistry(t), opts)
	waitShares(t, 15*time.Second, n)
	if _, err := admin.Exec(t.Context(), `DELETE FROM mirrors WHERE name = 'beta'`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "beta's workers to stop", func() (bool, string) {
		n.runner.mu.Lock()
		defer n.runner.mu.Unlock()
		var left []string
		for k := range n.runner.leases {
			if k.Mirror == "beta" {
				left = append(left, k.String())
			}
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	if out := log.String(); strings.Contains(out, "lease lost") {
		t.Fatalf("deleting a mirror logged a warning:\n%s", out)
	}
}

// syncBuffer is a log writer that several goroutines share.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

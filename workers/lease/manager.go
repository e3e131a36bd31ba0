package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"kmirror/internal/runtime/notifier"
	"kmirror/internal/runtime/startstop"
	"kmirror/internal/runtime/testsignal"
	"kmirror/repo"
)

// PartitionRunner runs partition workers for the lease manager. The manager
// calls it from its own goroutine; StopPartition may be called concurrently
// for different keys.
type PartitionRunner interface {
	// StartPartition starts the worker for l.Key and returns promptly. ctx
	// ends when the lease does; context.Cause is ErrLost or
	// ErrReleased. The worker checks l.Valid() before each write that
	// must not outlive the lease.
	StartPartition(ctx context.Context, l *Lease)
	// StopPartition stops the worker for k and blocks until it has exited.
	// On a hand-back the lease is still valid meanwhile, so the worker can
	// flush and checkpoint; it should finish well within the lease margin.
	StopPartition(k Key)
	// DeliveryTimeout is the longest a copy a worker hands to the
	// destination's producer may take to land or fail. Trust needs it
	// shorter than the margin, so that every copy made under a lease is
	// settled before another instance may take it (NewManager checks).
	DeliveryTimeout() time.Duration
}

// PartitionSettler is implemented by a PartitionRunner whose partitions can
// still have writes in flight after their worker exits (copies a stalled
// destination has not answered). Such a lease is released only once
// Settled says they are answered; meanwhile it stays this instance's in the
// database, alive with the session, so no other instance aligns under
// copies that may yet land.
type PartitionSettler interface {
	Settled(k Key) bool
}

// MirrorRunner runs metadata sync for the mirrors whose metadata lease this
// instance holds. The lease's Key has only Mirror set. Same contract as
// PartitionRunner.
type MirrorRunner interface {
	StartMirror(ctx context.Context, l *Lease)
	StopMirror(mirror string)
}

// ManagerConfig wires a Manager. Zero durations take the defaults.
type ManagerConfig struct {
	Pool       *pgxpool.Pool
	InstanceID string
	// Hostname and Version are registered with the instance.
	Hostname, Version string
	// TTL is how long a lease lasts in the database after each renewal;
	// default 15s.
	TTL time.Duration
	// RenewInterval is the time between renewals; default TTL/3. It must be
	// shorter than TTL − Margin.
	RenewInterval time.Duration
	// Margin is how long before the database expiry this instance stops
	// trusting a lease; default TTL/3. A worker's record delivery deadline
	// must be shorter.
	Margin time.Duration
	// Timeout bounds each lease statement; default RenewInterval.
	Timeout time.Duration
	// MinPassInterval is the least time between two passes, however often
	// they are asked for; default 100ms.
	MinPassInterval time.Duration
	// Notifier, when set, wakes the loop when lease demand or desired
	// states change; without it, changes wait for the next renewal.
	Notifier *notifier.Notifier
	Logger   *slog.Logger
	// Partitions runs partition workers; nil takes no partition leases.
	Partitions PartitionRunner
	// Mirrors runs metadata sync; nil takes no mirror metadata leases. With
	// neither, the manager keeps only the instance's session: it is listed
	// live, and not counted when leases are shared.
	Mirrors MirrorRunner
	// Registerer receives the kmirror_lease_renewal_* metrics; nil leaves
	// them unregistered.
	Registerer prometheus.Registerer
	// StopBudget, when set, bounds Stop's statements and its wait for
	// unsettled leases by the instance's shutdown budget.
	StopBudget *startstop.Budget
	// Heartbeat, with OutageGrace, lets leases ride through a database
	// outage (package heartbeat): while the session cannot be renewed, each
	// acknowledged heartbeat keeps the leases trusted, for up to
	// OutageGrace past the session's last renewal; and the leases of a
	// session whose heartbeats go on are not taken. Nil or a zero grace:
	// leases last as long as the session's renewals.
	Heartbeat   Heartbeater
	OutageGrace time.Duration
}

// Heartbeater is the clock on the destination cluster that carries leases
// through a database outage (heartbeat.Heartbeats; see Trust).
type Heartbeater interface {
	// Beat writes a heartbeat of the session and returns once it is
	// acknowledged.
	Beat(ctx context.Context, session int64) error
	// Spared says which expired sessions' leases must not be taken yet.
	Spared(grace, ttl, margin time.Duration) repo.Spared
}

func (c *ManagerConfig) validate() error {
	switch {
	case c.Pool == nil:
		return errors.New("lease manager: Pool is required")
	case c.InstanceID == "":
		return errors.New("lease manager: InstanceID is required")
	case c.Timeout <= 0:
		return errors.New("lease manager: Timeout must be positive")
	}
	return nil
}

// trust is the Trust of c's durations and its partition runner's delivery
// timeout.
func (c *ManagerConfig) trust() (Trust, error) {
	var delivery time.Duration
	if c.Partitions != nil {
		delivery = c.Partitions.DeliveryTimeout()
	}
	return NewTrust(c.TTL, c.Margin, c.RenewInterval, c.OutageGrace, delivery)
}

// Manager keeps the instance's session, the clock its leases hang on, and its
// fair share of partition leases and mirror metadata leases, which hang on
// the session: every RenewInterval (and when the notifier says lease demand
// or desired states changed) it renews the session, stops the workers of
// leases it lost, takes free leases up to ceil(demand / live instances),
// and hands back the excess when another instance joins. It registers the
// instance when it starts and marks it stopped when it stops.
type Manager struct {
	startstop.Base
	// TestSignals are raised at the points tests wait for; inert unless a
	// test initializes them before Start.
	TestSignals ManagerTestSignals
	cfg         ManagerConfig
	trust       Trust // from cfg's durations: how long leases are trusted
	log         *slog.Logger
	metrics     *managerMetrics
	sets        []*leaseSet
	poke        chan struct{}
	base        context.Context // Start's ctx without its cancellation

	// partitions is the partition lease set in sets (nil without a
	// PartitionRunner).
	partitions *leaseSet
	// session is the current session epoch (0: none open), on which every
	// lease hangs, and sessionAt when its last successful renewal or
	// opening started, zero when this pass could not renew it. Only the
	// loop, or Stop after it, uses them.
	session   int64
	sessionAt time.Time
	// nextExpiry: the first other instance's session expires this long
	// after the last pass's demand count (0: none); run wakes then.
	nextExpiry time.Duration
	// passes is the loop's statements' context: Stop cuts it once the pass
	// in progress has had a stop statement's time (base is the statements'
	// context otherwise).
	passes    context.Context
	cutPasses context.CancelFunc
	halted    bool
	// releaseFailed: the last release statement failed; a stop then waits
	// no more for the database and leaves the leases to expire.
	releaseFailed bool

	// beat is what the heartbeat loop needs of the lease loop's state.
	beat struct {
		mu sync.Mutex
		// session and renewedAt copy session and the sessionAt of its last
		// successful renewal; leases are the leases taken (ended
		// ones are dropped as the loop finds them).
		session   int64
		renewedAt time.Time
		leases    map[*Lease]struct{}
	}
	beatNow chan struct{}
}

// ManagerTestSignals are the Manager's points of interest for tests.
type ManagerTestSignals struct {
	// Expired: a lease's trust deadline passed without a renewal (its Done
	// is already closed).
	Expired testsignal.Signal[Key]
	// Lost: a lost lease's worker has stopped.
	Lost testsignal.Signal[Key]
	// HandedBack: a lease was handed back: its worker stopped, the lease
	// ended, and its release in the database was attempted.
	HandedBack testsignal.Signal[Key]
	// RenewFailed: a renewal statement failed, with its error.
	RenewFailed testsignal.Signal[error]
	// SessionRenewed: the session (and with it every lease) was renewed or
	// opened, with its epoch.
	SessionRenewed testsignal.Signal[int64]
}

// NewManager returns a Manager; Start begins taking leases.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	cfg.TTL = cmp.Or(cfg.TTL, 15*time.Second)
	cfg.RenewInterval = cmp.Or(cfg.RenewInterval, cfg.TTL/3)
	cfg.Margin = cmp.Or(cfg.Margin, cfg.TTL/3)
	cfg.Timeout = cmp.Or(cfg.Timeout, cfg.RenewInterval)
	cfg.MinPassInterval = cmp.Or(cfg.MinPassInterval, 100*time.Millisecond)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	trust, err := cfg.trust()
	if err != nil {
		return nil, err
	}
	metrics, err := newManagerMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		metrics: metrics,
		cfg:     cfg,
		trust:   trust,
		log:     cmp.Or(cfg.Logger, slog.Default()),
		poke:    make(chan struct{}, 1),
		beatNow: make(chan struct{}, 1),
	}
	m.beat.leases = map[*Lease]struct{}{}
	if r := cfg.Partitions; r != nil {
		m.partitions = m.partitionLeaseSet(r)
		m.sets = append(m.sets, m.partitions)
	}
	if r := cfg.Mirrors; r != nil {
		m.sets = append(m.sets, m.mirrorLeaseSet(r))
	}
	return m, nil
}

// takesLeases says whether this instance counts when leases are shared.
func (m *Manager) takesLeases() bool { return len(m.sets) > 0 }

// Start registers the instance and begins the lease loop. ctx provides
// values only: the loop runs until Stop, so that leases are always handed
// back in order.
func (m *Manager) Start(ctx context.Context) error {
	if _, ok := m.StartInit(ctx); !ok {
		return startstop.ErrStarted
	}
	if err := m.register(ctx); err != nil {
		m.StopInit()
		return fmt.Errorf("register instance: %w", err)
	}
	m.base = context.WithoutCancel(ctx)
	m.passes, m.cutPasses = context.WithCancel(m.base)
	desired := m.cfg.Notifier.Subscribe(repo.ChannelDesired)
	demand := m.cfg.Notifier.Subscribe(repo.ChannelLeaseDemand)
	m.Go(func(ctx context.Context) {
		defer desired.Unsubscribe()
		defer demand.Unsubscribe()
		m.run(ctx, desired, demand)
	})
	if m.ridesThrough() {
		m.Go(m.beatLoop)
	}
	return nil
}

// Stop ends the loop, stops every worker (waiting for each to exit), then
// releases all leases in the database.
func (m *Manager) Stop() {
	if !m.StopInit() {
		return
	}
	// A pass's statement is not cut in normal running (its result is
	// needed), but a shutdown does not wait out a database that hangs: the
	// pass in progress gets what a stop's statement gets.
	cut := time.AfterFunc(m.cfg.StopBudget.Bound(m.cfg.Timeout, stopStatementTimeout), m.cutPasses)
	m.Halt()
	cut.Stop()
	m.halted = true // the loop has ended: Stop's own statements from here
	m.cutPasses()

	// Marked stopped first: the other instances no longer count this one
	// in their fair share (LeasesCountDemand), so each lease it releases
	// below is theirs to take at once, not only once its session closes
	// (a second later at thousands of partitions, or never if a write is
	// left in flight). Its session still guards what it holds.
	m.markStopped()
	for _, s := range m.sets {
		m.handBack(s, s.all())
	}
	if m.awaitReleases() {
		m.closeSession()
	}
}

// register records the instance, reviving a stopped id.
//
// A database that answers slowly at that moment (a busy machine, a
// failover in progress) is tried again, each time under Timeout, for up to
// a TTL: an instance holds no lease yet, so waiting costs nothing, and
// giving up would make its caller exit for a passing stall.
func (m *Manager) register(ctx context.Context) error {
	deadline := time.Now().Add(m.cfg.TTL)
	for {
		attempt, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
		err := repo.InstancesRegister(attempt, m.cfg.Pool, m.cfg.InstanceID, m.cfg.Hostname, m.cfg.Version, m.takesLeases())
		cancel()
		if err == nil || !errors.Is(err, repo.ErrUnavailable) || time.Now().After(deadline) {
			return err
		}
		m.log.Warn("registering the instance failed; trying again", "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(m.cfg.Timeout / 4):
		}
	}
}

// markStopped records a clean stop, so the instance is no longer listed
// live; within the shutdown budget.
func (m *Manager) markStopped() {
	ctx, cancel := m.cfg.StopBudget.Context(m.base, stopStatementTimeout)
	defer cancel()
	if err := repo.InstancesStop(ctx, m.cfg.Pool, m.cfg.InstanceID); err != nil {
		m.log.Warn("marking the instance stopped failed", "err", err)
		// A database that did not answer the stop's first statement is not
		// asked again: the releases would wait out their bound as well,
		// and the leases expire with the session all the same.
		m.releaseFailed = errors.Is(err, repo.ErrUnavailable)
	}
}

// stopStatementTimeout bounds each statement of a stop, within the
// shutdown's budget: a database that does not answer then is left to the
// leases' expiry.
const stopStatementTimeout = time.Second

// stopReleaseWait bounds, within a shutdown's budget, the wait for leases
// whose copies are unanswered: what is left goes to the steps after it.
const stopReleaseWait = time.Second

// awaitReleases gives leases held back by writes in flight (see
// PartitionSettler) until the session stops being trusted, or the shutdown
// budget is spent, to be answered and released. It reports whether every
// lease was released: if not, the session is left to expire rather than
// closed, since closing it would free at once a lease whose copies may
// still land.
func (m *Manager) awaitReleases() bool {
	if m.sessionAt.IsZero() {
		return true
	}
	deadline := m.trust.AfterRenewal(m.sessionAt)
	if left := time.Now().Add(m.cfg.StopBudget.Bound(m.cfg.TTL, stopReleaseWait)); left.Before(deadline) {
		deadline = left
	}
	for {
		waiting := 0
		for _, s := range m.sets {
			m.flushReleases(s)
			waiting += len(s.unreleased)
		}
		if waiting == 0 {
			return true
		}
		if m.releaseFailed || time.Now().After(deadline) {
			m.log.Warn("stopping with leases not released (writes still in flight, or the database did not answer); "+
				"they are free for other instances when the session expires", "leases", waiting, "ttl", m.cfg.TTL)
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Crash stops the manager as a crashed process would: the loop ends, every
// lease ends as lost (so workers stop without flushing a hand-back) and
// nothing is released in the database, where the leases stay until they
// expire. It exists for crash tests.
func (m *Manager) Crash() {
	if !m.StopAndHalt() {
		return
	}
	for _, s := range m.sets {
		held := s.all()
		for _, l := range held {
			l.end(fmt.Errorf("%w: crashed", ErrLost))
		}
		s.stopAll(held)
	}
}

// wake makes the loop run a pass now (after MinPassInterval) instead of at
// the next interval: a lease whose trust deadline passed must be reaped.
func (m *Manager) wake() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// run passes every RenewInterval, and sooner after a poke or a NOTIFY that
// lease demand or desired states changed, but never more often than every
// MinPassInterval: a burst of changes costs one pass, not one per change.
//
// It also passes when another instance's session expires (expiryWake): a
// crashed instance's leases are free from that moment, and waiting for the
// next interval took up to a RenewInterval longer to copy its partitions
// again.
func (m *Manager) run(ctx context.Context, desired, demand *notifier.Subscription) {
	t := time.NewTicker(m.cfg.RenewInterval)
	defer t.Stop()
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	for {
		m.pass()
		expiry.Stop()
		if m.nextExpiry > 0 {
			expiry.Reset(m.nextExpiry + expiryWake)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.cfg.MinPassInterval):
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-expiry.C:
		case <-m.poke:
		case <-desired.C():
		case <-demand.C():
		}
	}
}

// expiryWake is how long after another session's expiry, by the
// database's clock, the pass that takes its leases runs: past it, so that
// the database finds it expired.
const expiryWake = 50 * time.Millisecond

// pass renews, drops what was lost, then acquires or hands back towards the
// fair share. Its statements run under m.base, bounded by Timeout, so Stop
// waits for a pass instead of cutting a statement whose result is needed.
func (m *Manager) pass() {
	// Demand is counted before renewing: a partition that finishes stopping
	// in between is then handed back by the renewal as inactive, and the
	// share cannot shrink under a lease that still needs its worker (which
	// would hand back a partition mid-STOPPING instead).
	var demand repo.LeaseDemand
	demandErr := m.within("lease demand count", func(ctx context.Context) (err error) {
		demand, err = repo.LeasesCountDemand(ctx, m.cfg.Pool, m.cfg.InstanceID, orphanedAfter)
		return err
	})
	m.nextExpiry = demand.NextExpiry // 0 when the count failed
	// Expired sessions' leases nobody took become orphaned: a pass then
	// takes them beyond the share (acquireOrphans).
	if d := demand.NextOrphaned; d > 0 && (m.nextExpiry == 0 || d < m.nextExpiry) {
		m.nextExpiry = d
	}
	// A crashed instance's leases stay spared past its session's expiry
	// while its last heartbeat is recent (riding through an outage): the
	// pass that takes them runs when that ends, too.
	if ends := m.spared().Ends; !ends.IsZero() {
		if d := time.Until(ends); d > 0 && (m.nextExpiry == 0 || d < m.nextExpiry) {
			m.nextExpiry = d
		}
	}
	renewed := true
	renewStart := time.Now()
	if err := m.renewSession(); err != nil {
		m.log.Warn("lease session renew failed; leases stay trusted until their deadline", "err", err)
		m.TestSignals.RenewFailed.Signal(err)
		m.metrics.failures.WithLabelValues("session").Inc()
		renewed = false
	}
	for _, s := range m.sets {
		m.reap(s)
		if err := m.renew(s); err != nil {
			m.log.Warn("lease renew failed; leases stay trusted until their deadline", "kind", s.kind, "err", err)
			m.TestSignals.RenewFailed.Signal(err)
			m.metrics.failures.WithLabelValues(s.kind).Inc()
			renewed = false
		}
	}
	m.metrics.renewal.Observe(time.Since(renewStart).Seconds())
	if !renewed {
		return // the database is in trouble: do not take more
	}
	for _, s := range m.sets {
		m.flushReleases(s) // before acquiring, so they are free to take again
	}
	if demandErr != nil {
		m.log.Warn("counting lease demand failed", "err", demandErr)
		return
	}
	for _, s := range m.sets {
		share := ceilDiv(s.demand(demand), max(demand.LiveInstances, 1))
		switch held := len(s.held); {
		case held < share:
			m.acquire(s, s.acquire, share-held)
		case held > share:
			m.handBack(s, s.excess(held-share))
		default:
			if s.acquireOrphans != nil && demand.Orphaned {
				// Held to the share: the leases of sessions that expired
				// a while ago and that nobody took (the instance whose
				// share they are cannot yet) are taken here all the same,
				// and handed back at the next pass, free for it.
				m.acquire(s, s.acquireOrphans, share)
			}
		}
	}
}

// orphanedAfter is how long after its session's expiry a partition lease
// that nobody took is taken beyond the fair share: time for the instances
// under their share, woken at the expiry, to take it first.
const orphanedAfter = 2 * time.Second

// renewSession renews this instance's session, the one write that renews
// every lease, opening one when there is none. A session that expired or
// was replaced in the database loses every lease that hung on it; a new one
// is opened at once (registering the instance again if its row is gone).
func (m *Manager) renewSession() error {
	m.sessionAt = time.Time{}
	start := time.Now() // before the statement: the deadline errs early
	if m.session != 0 {
		err := m.within("lease session renew", func(ctx context.Context) error {
			return repo.InstancesRenewSession(ctx, m.cfg.Pool, m.cfg.InstanceID, m.session, m.cfg.TTL)
		})
		if err == nil {
			m.renewed(start)
			return nil
		}
		if !errors.Is(err, repo.ErrNotFound) {
			return err
		}
		if m.revive() {
			return nil
		}
		for _, s := range m.sets {
			m.drop(s, s.all(), "lease session expired or replaced", false)
		}
		m.session = 0
		start = time.Now()
	}
	var epoch int64
	err := m.within("lease session open", func(ctx context.Context) (err error) {
		epoch, err = repo.InstancesOpenSession(ctx, m.cfg.Pool, m.cfg.InstanceID, m.cfg.TTL)
		if errors.Is(err, repo.ErrNotFound) { // the instance's row was deleted
			if err = repo.InstancesRegister(ctx, m.cfg.Pool, m.cfg.InstanceID, m.cfg.Hostname, m.cfg.Version,
				m.takesLeases()); err == nil {
				epoch, err = repo.InstancesOpenSession(ctx, m.cfg.Pool, m.cfg.InstanceID, m.cfg.TTL)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	m.session = epoch
	m.renewed(start)
	m.log.Info("lease session opened", "session", epoch)
	return nil
}

// renewed records a successful renewal or opening of the session that
// started at start.
func (m *Manager) renewed(start time.Time) {
	m.sessionAt = start
	m.beat.mu.Lock()
	m.beat.session, m.beat.renewedAt = m.session, start
	m.beat.mu.Unlock()
	m.TestSignals.SessionRenewed.Signal(m.session)
	// A heartbeat right after each renewal keeps the two clocks in step,
	// so a crash's leases are spared no longer than its session lasts.
	select {
	case m.beatNow <- struct{}{}:
	default:
	}
}

// revive renews the session after the database expired it, when its
// leases are still trusted on heartbeats: they rode through an
// outage, and no other instance may have taken them (repo.Spared). It
// reports whether the session lives on.
func (m *Manager) revive() bool {
	if !m.ridesThrough() || !slices.ContainsFunc(m.sets, func(s *leaseSet) bool { return slices.ContainsFunc(s.all(), (*Lease).Valid) }) {
		return false
	}
	start := time.Now()
	err := m.within("lease session revive", func(ctx context.Context) error {
		return repo.InstancesReviveSession(ctx, m.cfg.Pool, m.cfg.InstanceID, m.session, m.cfg.TTL)
	})
	if err != nil {
		return false
	}
	m.renewed(start)
	m.log.Info("lease session renewed after it expired: its leases were kept through a database outage on heartbeats",
		"session", m.session)
	return true
}

// closeSession ends the session once every lease was handed back, so other
// instances stop counting this one at once.
func (m *Manager) closeSession() {
	if m.session == 0 {
		return
	}
	m.beat.mu.Lock()
	m.beat.session = 0
	m.beat.mu.Unlock()
	err := m.within("lease session close", func(ctx context.Context) error {
		return repo.InstancesCloseSession(ctx, m.cfg.Pool, m.cfg.InstanceID, m.session)
	})
	if err != nil {
		m.log.Warn("closing the lease session failed; it will expire", "err", err)
	}
	m.session = 0
}

// reap stops the workers of leases whose trust deadline passed. The database
// may still name this instance, so they are queued for release.
func (m *Manager) reap(s *leaseSet) {
	var expired []*Lease
	for _, l := range s.held {
		if !l.Valid() {
			expired = append(expired, l)
		}
	}
	m.drop(s, expired, "trust deadline passed without renewal", true)
}

// renew checks the held leases against those the database still gives the
// session, whose renewal extended them all. A lease it no longer gives is
// lost; one whose partition no longer needs a worker is handed back.
func (m *Manager) renew(s *leaseSet) error {
	if len(s.held) == 0 {
		return nil
	}
	held := s.all()
	// Leases are renewed by the session; this only reads which of them the
	// database still gives this session.
	if m.sessionAt.IsZero() {
		return errors.New(s.kind + " leases not renewed: the session was not")
	}
	start := m.sessionAt
	var got []leaseRow
	err := m.within(s.kind+" lease renew", func(ctx context.Context) (err error) {
		got, err = s.owned(ctx, m.cfg.InstanceID)
		return err
	})
	if err != nil {
		return err
	}
	deadline := m.trust.AfterRenewal(start)
	granted := make(map[Key]leaseRow, len(got))
	for _, r := range got {
		granted[r.key] = r
	}
	var refused, expired, inactive []*Lease
	for _, l := range held {
		r, ok := granted[l.Key]
		switch {
		case !ok:
			refused = append(refused, l)
		case !l.extend(deadline):
			expired = append(expired, l)
		case !r.active:
			inactive = append(inactive, l)
		}
	}
	deleted, refused := m.deleted(s, refused)
	m.dropAt(s, deleted, "its mirror was deleted", false, slog.LevelInfo)
	m.drop(s, refused, "renewal refused: taken by another owner or expired", false)
	m.drop(s, expired, "trust deadline passed during renewal", true)
	m.handBack(s, inactive)
	return nil
}

// deleted picks, of the leases whose renewal was refused, those whose
// mirror no longer exists: a delete removed their rows, which is how a
// deleted mirror's leases end, not a lease lost to another owner. When the
// check cannot be made, every one counts as lost.
func (m *Manager) deleted(s *leaseSet, refused []*Lease) (deleted, lost []*Lease) {
	if len(refused) == 0 {
		return nil, nil
	}
	var names []string
	for _, l := range refused {
		if !slices.Contains(names, l.Key.Mirror) {
			names = append(names, l.Key.Mirror)
		}
	}
	var exist map[string]bool
	err := m.within(s.kind+" lease mirrors check", func(ctx context.Context) (err error) {
		exist, err = repo.MirrorsExist(ctx, m.cfg.Pool, names)
		return err
	})
	if err != nil {
		return nil, refused
	}
	for _, l := range refused {
		if exist[l.Key.Mirror] {
			lost = append(lost, l)
		} else {
			deleted = append(deleted, l)
		}
	}
	return deleted, lost
}

// drop ends lost leases first, so their workers see Valid false and a
// cancelled context, then waits for the workers to exit. expired says the
// trust deadline passed: the database may still name this instance, so the
// leases are queued for release.
func (m *Manager) drop(s *leaseSet, lost []*Lease, why string, expired bool) {
	m.dropAt(s, lost, why, expired, slog.LevelWarn)
}

// dropAt is drop logging at level: INFO for the leases of a deleted mirror
// (Manager.deleted), which ended as they should.
func (m *Manager) dropAt(s *leaseSet, lost []*Lease, why string, expired bool, level slog.Level) {
	if len(lost) == 0 {
		return
	}
	msg := "lease lost"
	if level < slog.LevelWarn {
		msg = "lease ended"
	}
	for _, l := range lost {
		// The deadline's timer may not have fired yet: then this ends the
		// lease, and the expiry is signalled here instead.
		if l.end(fmt.Errorf("%w: %s", ErrLost, why)) && expired {
			m.TestSignals.Expired.Signal(l.Key)
		}
		m.log.Log(context.Background(), level, msg, append(l.logAttrs(), "kind", s.kind, "reason", why)...)
	}
	s.stopAll(lost)
	for _, l := range lost {
		m.TestSignals.Lost.Signal(l.Key)
	}
	if expired {
		s.unreleased = append(s.unreleased, rowsOf(lost)...)
	}
}

// acquire takes up to limit leases and starts their workers.
func (m *Manager) acquire(s *leaseSet, take func(ctx context.Context, owner string, limit int) ([]leaseRow, error), limit int) {
	start := m.sessionAt // a lease lasts as long as the session
	var got []leaseRow
	err := m.within(s.kind+" lease acquire", func(ctx context.Context) (err error) {
		got, err = take(ctx, m.cfg.InstanceID, limit)
		return err
	})
	if err != nil {
		m.log.Warn("lease acquire failed", "kind", s.kind, "err", err)
		return
	}
	if len(got) > 0 && len(got) < limit {
		// Some but not all: another instance taking leases at the same
		// moment (after the same expiry) may have held rows that are free
		// again once it is done. One more pass soon, not at the next
		// interval.
		m.wake()
	}
	deadline := m.trust.AfterRenewal(start)
	for _, r := range got {
		key := r.key
		l, ctx := newLease(m.base, key, m.cfg.InstanceID, r.epoch, deadline, func() {
			m.TestSignals.Expired.Signal(key)
			m.wake()
		})
		l.Previous = r.previous
		if !l.Valid() { // the statement outlasted the trust window
			l.end(fmt.Errorf("%w: trust deadline passed during acquire", ErrLost))
			s.unreleased = append(s.unreleased, r)
			continue
		}
		s.held[r.key] = l
		if m.ridesThrough() {
			m.beat.mu.Lock()
			m.beat.leases[l] = struct{}{}
			m.beat.mu.Unlock()
		}
		m.log.Info("lease acquired", append(l.logAttrs(), "kind", s.kind)...)
		s.start(ctx, l)
	}
}

// handBack stops the workers (the leases stay valid while they flush), then
// ends the leases and releases them in the database.
func (m *Manager) handBack(s *leaseSet, leases []*Lease) {
	if len(leases) == 0 {
		return
	}
	s.stopAll(leases)
	for _, l := range leases {
		l.end(ErrReleased)
		m.log.Info("lease handed back", append(l.logAttrs(), "kind", s.kind)...)
	}
	s.unreleased = append(s.unreleased, rowsOf(leases)...)
	m.flushReleases(s)
	for _, l := range leases {
		m.TestSignals.HandedBack.Signal(l.Key)
	}
}

// flushReleases releases, in one statement, the leases whose workers have
// exited but which the database may still attribute to this instance.
// Owner and epoch must match, so a lease someone else took is untouched.
func (m *Manager) flushReleases(s *leaseSet) {
	if len(s.unreleased) == 0 || m.halted && m.releaseFailed {
		return // a stopping manager tries a database that failed it once only
	}
	// Leases whose partitions still have writes in flight wait (see
	// PartitionSettler).
	var ready, waiting []leaseRow
	for _, r := range s.unreleased {
		if s.settled == nil || s.settled(r.key) {
			ready = append(ready, r)
		} else {
			waiting = append(waiting, r)
		}
	}
	if len(ready) > 0 {
		err := m.within(s.kind+" lease release", func(ctx context.Context) error {
			return s.release(ctx, m.cfg.InstanceID, ready)
		})
		m.releaseFailed = err != nil
		if err != nil {
			m.log.Warn("lease release failed; the leases will expire", "kind", s.kind, "leases", len(s.unreleased), "err", err)
			return
		}
	}
	s.unreleased = waiting
}

// within runs fn under Timeout, or what is left of the shutdown budget; a
// timeout's error names the operation, as in "partition lease renew timed
// out after 5s".
func (m *Manager) within(what string, fn func(ctx context.Context) error) error {
	d := m.cfg.StopBudget.Bound(m.cfg.Timeout, stopStatementTimeout)
	base := m.passes
	if m.halted {
		base = m.base
	}
	ctx, cancel := context.WithTimeoutCause(base, d, fmt.Errorf("%s timed out after %s", what, d))
	defer cancel()
	err := fn(ctx)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// leaseRow is one lease as the database sees it, for either kind.
type leaseRow struct {
	key      Key
	epoch    int64
	active   bool
	previous string // on acquire: the last owner before
}

func rowsOf(leases []*Lease) []leaseRow {
	out := make([]leaseRow, len(leases))
	for i, l := range leases {
		out[i] = leaseRow{key: l.Key, epoch: l.Epoch}
	}
	return out
}

// leaseSet is the held leases of one kind and how to manage them. Only the
// manager's loop (or Stop, after the loop ended) touches it.
type leaseSet struct {
	kind    string // "partition" or "mirror metadata", for logs and errors
	owned   func(ctx context.Context, owner string) ([]leaseRow, error)
	acquire func(ctx context.Context, owner string, limit int) ([]leaseRow, error)
	// acquireOrphans takes orphaned leases beyond the share (nil: the kind
	// has none to take; repo.PartitionsAcquireOrphanedLeases).
	acquireOrphans func(ctx context.Context, owner string, limit int) ([]leaseRow, error)
	release        func(ctx context.Context, owner string, held []leaseRow) error
	demand         func(repo.LeaseDemand) int
	start          func(ctx context.Context, l *Lease)
	stop           func(k Key)

	held map[Key]*Lease
	// unreleased are leases whose workers have exited but which may still
	// be ours in the database; they are released at the next chance, once
	// settled (nil: at once) says their writes are all answered.
	unreleased []leaseRow
	settled    func(Key) bool
}

// all returns the held leases in key order.
func (s *leaseSet) all() []*Lease {
	out := make([]*Lease, 0, len(s.held))
	for _, l := range s.held {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *Lease) int { return compareKeys(a.Key, b.Key) })
	return out
}

// excess picks n leases to hand back: the last ones in key order, so an
// instance keeps a stable set.
func (s *leaseSet) excess(n int) []*Lease {
	all := s.all()
	return all[len(all)-n:]
}

// stopAll stops the workers concurrently, waits for all of them, and forgets
// the leases.
func (s *leaseSet) stopAll(leases []*Lease) {
	var wg sync.WaitGroup
	for _, l := range leases {
		wg.Go(func() { s.stop(l.Key) })
	}
	wg.Wait()
	for _, l := range leases {
		if s.held[l.Key] == l {
			delete(s.held, l.Key)
		}
	}
}

func (m *Manager) partitionLeaseSet(r PartitionRunner) *leaseSet {
	pool := m.cfg.Pool
	toRepo := func(rows []leaseRow) []repo.PartitionLeaseRow {
		out := make([]repo.PartitionLeaseRow, len(rows))
		for i, r := range rows {
			out[i] = repo.PartitionLeaseRow{Mirror: r.key.Mirror, Topic: r.key.Topic, Partition: r.key.Partition, Epoch: r.epoch}
		}
		return out
	}
	fromRepo := func(rows []repo.PartitionLeaseRow, err error) ([]leaseRow, error) {
		out := make([]leaseRow, len(rows))
		for i, r := range rows {
			out[i] = leaseRow{key: Key{r.Mirror, r.Topic, r.Partition}, epoch: r.Epoch, active: r.Active, previous: r.PreviousOwner}
		}
		return out, err
	}
	var settled func(Key) bool
	if st, ok := r.(PartitionSettler); ok {
		settled = st.Settled
	}
	return &leaseSet{
		kind:    "partition",
		settled: settled,
		owned: func(ctx context.Context, owner string) ([]leaseRow, error) {
			return fromRepo(repo.PartitionsOwned(ctx, pool, owner, m.session))
		},
		acquire: func(ctx context.Context, owner string, limit int) ([]leaseRow, error) {
			return fromRepo(repo.PartitionsAcquireLeases(ctx, pool, owner, m.session, limit, m.spared()))
		},
		acquireOrphans: func(ctx context.Context, owner string, limit int) ([]leaseRow, error) {
			return fromRepo(repo.PartitionsAcquireOrphanedLeases(ctx, pool, owner, m.session, limit, m.spared(), orphanedAfter))
		},
		release: func(ctx context.Context, owner string, held []leaseRow) error {
			_, err := repo.PartitionsReleaseLeases(ctx, pool, owner, toRepo(held))
			return err
		},
		demand: func(d repo.LeaseDemand) int { return d.ActivePartitions },
		start:  r.StartPartition,
		stop:   r.StopPartition,
		held:   map[Key]*Lease{},
	}
}

func (m *Manager) mirrorLeaseSet(r MirrorRunner) *leaseSet {
	pool := m.cfg.Pool
	toRepo := func(rows []leaseRow) []repo.MirrorLeaseRow {
		out := make([]repo.MirrorLeaseRow, len(rows))
		for i, r := range rows {
			out[i] = repo.MirrorLeaseRow{Mirror: r.key.Mirror, Epoch: r.epoch}
		}
		return out
	}
	fromRepo := func(rows []repo.MirrorLeaseRow, err error) ([]leaseRow, error) {
		out := make([]leaseRow, len(rows))
		for i, r := range rows {
			out[i] = leaseRow{key: Key{Mirror: r.Mirror}, epoch: r.Epoch, active: true}
		}
		return out, err
	}
	return &leaseSet{
		kind: "mirror metadata",
		owned: func(ctx context.Context, owner string) ([]leaseRow, error) {
			return fromRepo(repo.MirrorsOwnedMetaLeases(ctx, pool, owner, m.session))
		},
		acquire: func(ctx context.Context, owner string, limit int) ([]leaseRow, error) {
			return fromRepo(repo.MirrorsAcquireMetaLeases(ctx, pool, owner, m.session, limit, m.spared()))
		},
		release: func(ctx context.Context, owner string, held []leaseRow) error {
			_, err := repo.MirrorsReleaseMetaLeases(ctx, pool, owner, toRepo(held))
			return err
		},
		demand: func(d repo.LeaseDemand) int { return d.Mirrors },
		start:  r.StartMirror,
		stop:   func(k Key) { r.StopMirror(k.Mirror) },
		held:   map[Key]*Lease{},
	}
}

func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Mirror, b.Mirror), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

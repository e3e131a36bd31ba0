package metadatasync

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/plugin/kslog"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/runtime/notifier"
	"kmirror/internal/runtime/startstop"
	"kmirror/internal/runtime/testsignal"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/lease"
)

// SyncerTestSignals are the Syncer's points of interest for tests.
type SyncerTestSignals struct {
	// BeforeKind: a pass is about to run a kind, with the kind's name. It
	// is raised in the pass's goroutine, so a panic in its hook is the
	// kind's.
	BeforeKind testsignal.Signal[string]
}

// PartitionAwaiter is the partition engine's producer as the sync sees it.
type PartitionAwaiter interface {
	// AwaitDestinationPartitions returns once the producer knows that a
	// destination topic has n partitions.
	AwaitDestinationPartitions(ctx context.Context, topic string, n int32) error
}

// Config wires a Syncer. Zero durations take the
// defaults.
type Config struct {
	Pool        *pgxpool.Pool
	Service     *service.Workers
	InstanceID  string
	Destination kafkaconn.Config
	// DestinationRegistry is the deployment's destination Schema Registry,
	// into which each mirror's source registry subjects are copied with
	// their ids kept (schemas.go); nil when the deployment has none.
	DestinationRegistry *schemaregistry.Config
	Logger              *slog.Logger
	// DefaultInterval is the pass interval of a mirror that does not set
	// mirror.metadata.refresh.interval.ms; default 30s.
	DefaultInterval time.Duration
	// RequestPollInterval is how often "sync now" requests are looked for
	// when no notification says one was made (the fallback poll), in one
	// query for every mirror this instance syncs; default 5s.
	RequestPollInterval time.Duration
	// Notifier, when set, wakes the request watcher as soon as a "sync
	// now" is requested.
	Notifier *notifier.Notifier
	// Timeout bounds each cluster request of a pass; default 10s.
	Timeout time.Duration
	// Registerer receives the kmirror_metadata_sync_* metrics; nil
	// registers none.
	Registerer prometheus.Registerer
	// SourceOpts are extra client options for source clients (tests).
	SourceOpts []kgo.Opt
	// Producer, when set, is this instance's destination producer: after
	// the sync grows a destination topic, it is made to load the new
	// partitions before their workers start.
	Producer PartitionAwaiter
	// ProbeInterval is how often the destination, and the source of each
	// mirror synced here, are asked whether they answer; default 5s.
	ProbeInterval time.Duration
	// ProbeTimeout bounds each probe; default 5s.
	ProbeTimeout time.Duration
}

func (c *Config) validate() error {
	switch {
	case c.Pool == nil || c.Service == nil:
		return errors.New("metadata syncer: Pool and Service are required")
	case c.InstanceID == "":
		return errors.New("metadata syncer: InstanceID is required")
	case len(c.Destination.BootstrapServers) == 0:
		return errors.New("metadata syncer: a destination cluster is required")
	case c.DefaultInterval < 0 || c.RequestPollInterval < 0 || c.Timeout < 0 || c.ProbeInterval < 0 || c.ProbeTimeout < 0:
		return errors.New("metadata syncer: durations must not be negative")
	}
	return nil
}

// Syncer runs the metadata sync (docs/design.md, "Metadata sync") of the mirrors
// whose metadata-sync lease this instance holds: it implements MirrorRunner
// for the lease manager. Each leased mirror has a goroutine that runs a pass
// when the lease is taken, then every mirror.metadata.refresh.interval.ms,
// and at once when "sync now" is requested. A mirror keeps one source client
// for as long as its lease is held; all mirrors share one destination client.
type Syncer struct {
	startstop.Base
	// TestSignals are raised at the points tests wait for or inject faults
	// at; inert unless a test initializes or hooks them before Start.
	TestSignals SyncerTestSignals
	cfg         Config
	log         *slog.Logger
	dst         *kgo.Client
	dstAdmin    *kadm.Client
	metrics     *syncMetrics
	// registry is the destination Schema Registry's client, nil without
	// one; schemaMetrics are the kmirror_schema_sync_* metrics.
	registry      *sr.Client
	schemaMetrics *schemaMetrics

	mu      sync.Mutex
	mirrors map[string]*mirrorSync
}

// New connects the destination client; Start watches for
// "sync now" requests, and the lease manager starts each mirror's sync.
func New(cfg Config) (*Syncer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.DefaultInterval = cmp.Or(cfg.DefaultInterval, 30*time.Second)
	cfg.RequestPollInterval = cmp.Or(cfg.RequestPollInterval, 5*time.Second)
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Second)
	cfg.ProbeInterval = cmp.Or(cfg.ProbeInterval, 5*time.Second)
	cfg.ProbeTimeout = cmp.Or(cfg.ProbeTimeout, 5*time.Second)
	log := cfg.Logger.With("component", "metadata-sync")
	metrics, err := newSyncMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	schemaMetrics, err := newSchemaMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	var registry *sr.Client
	if cfg.DestinationRegistry != nil {
		if registry, err = schemaregistry.NewClient(*cfg.DestinationRegistry); err != nil {
			return nil, fmt.Errorf("metadata syncer: destination schema registry: %w", err)
		}
	}
	return &Syncer{cfg: cfg, log: log, metrics: metrics, schemaMetrics: schemaMetrics, registry: registry,
		mirrors: map[string]*mirrorSync{}}, nil
}

// Start connects the destination client and watches for "sync now"
// requests of the mirrors this instance syncs.
func (s *Syncer) Start(ctx context.Context) error {
	if _, ok := s.StartInit(ctx); !ok {
		return startstop.ErrStarted
	}
	dst, err := s.cfg.Destination.NewClient(kgo.MetadataMinAge(250*time.Millisecond),
		kgo.WithLogger(kslog.New(s.log.With("client", "sync-destination"))))
	if err != nil {
		s.StopInit()
		return fmt.Errorf("metadata syncer: destination client: %w", err)
	}
	s.dst, s.dstAdmin = dst, kadm.NewClient(dst)
	sub := s.cfg.Notifier.Subscribe(repo.ChannelSync)
	s.Go(func(ctx context.Context) {
		defer sub.Unsubscribe()
		s.watchRequests(ctx, sub)
	})
	s.Go(s.probeDestination)
	if s.registry != nil {
		// A topic added, removed or paused wakes the schema syncs: an
		// added topic's subjects are copied before its partitions are
		// far along, and a removed one's are opened soon after.
		desired := s.cfg.Notifier.Subscribe(repo.ChannelDesired)
		s.Go(func(ctx context.Context) {
			defer desired.Unsubscribe()
			for {
				select {
				case <-ctx.Done():
					return
				case <-desired.C():
					s.mu.Lock()
					for _, r := range s.mirrors {
						r.wakeSchemas()
					}
					s.mu.Unlock()
				}
			}
		})
	}
	return nil
}

// Stop stops the request watcher and any mirror sync still running (the
// lease manager normally stopped them all first), then closes the
// destination client.
func (s *Syncer) Stop() {
	if !s.StopAndHalt() {
		return
	}
	s.mu.Lock()
	names := make([]string, 0, len(s.mirrors))
	for name := range s.mirrors {
		names = append(names, name)
	}
	s.mu.Unlock()
	for _, name := range names {
		s.StopMirror(name)
	}
	s.dst.Close()
}

// StartMirror starts the sync of a mirror whose metadata-sync lease this
// instance just took; its first pass runs at once.
func (s *Syncer) StartMirror(ctx context.Context, l *lease.Lease) {
	ctx, cancel := context.WithCancel(ctx)
	r := &mirrorSync{s: s, lease: l, name: l.Key.Mirror, cancel: cancel,
		log:  s.log.With("mirror", l.Key.Mirror, "epoch", l.Epoch),
		done: make(chan struct{}), probed: make(chan struct{}), wake: make(chan struct{}, 1),
		schemasDone: make(chan struct{}), schemaWake: make(chan struct{}, 1)}
	s.mu.Lock()
	old := s.mirrors[r.name]
	s.mirrors[r.name] = r
	s.mu.Unlock()
	if old != nil {
		old.stop()
	}
	go r.run(ctx)
	if s.registry != nil {
		go r.runSchemas(ctx, s.registry)
	} else {
		close(r.schemasDone)
	}
	go func() {
		defer close(r.probed)
		r.probeSource(ctx)
	}()
}

// StopMirror stops a mirror's sync, waits for a pass in progress to end, and
// drops its source client.
func (s *Syncer) StopMirror(mirror string) {
	s.mu.Lock()
	r := s.mirrors[mirror]
	delete(s.mirrors, mirror)
	s.mu.Unlock()
	if r != nil {
		r.stop()
		s.metrics.forget(mirror)
		s.schemaMetrics.forget(mirror)
	}
}

// Syncing returns the mirrors whose sync runs here.
func (s *Syncer) Syncing() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.mirrors))
	for name := range s.mirrors {
		out = append(out, name)
	}
	return out
}

// watchRequests looks, in one query, for "sync now" requests of the
// mirrors synced here that no pass has served yet, and wakes their
// goroutines: when notified, and every RequestPollInterval.
func (s *Syncer) watchRequests(ctx context.Context, requested *notifier.Subscription) {
	notifier.Loop(ctx, s.cfg.RequestPollInterval, requested, s.serveRequests)
}

func (s *Syncer) serveRequests(ctx context.Context) {
	s.forgetDeleted(ctx)
	names := s.Syncing()
	if len(names) == 0 {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, max(s.cfg.RequestPollInterval, time.Second))
	pending, err := repo.MirrorsPendingSyncRequests(qctx, s.cfg.Pool, names)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Debug("looking for sync requests failed", "err", err)
		}
		return
	}
	for name, at := range pending {
		s.mu.Lock()
		r := s.mirrors[name]
		s.mu.Unlock()
		if r != nil {
			r.request(at)
		}
	}
}

// mirrorSync is one leased mirror's sync goroutine.
type mirrorSync struct {
	s      *Syncer
	lease  *lease.Lease
	name   string
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	// probed is closed when the source prober has returned.
	probed chan struct{}
	wake   chan struct{}
	// schemasDone is closed when the schema sync has returned (at once
	// without a destination registry); schemaWake asks it for a pass.
	schemasDone chan struct{}
	schemaWake  chan struct{}

	mu sync.Mutex
	// requested is the latest "sync now" request seen (the database's
	// clock); a pass records the one it started after as served.
	requested time.Time

	// srcMu guards src and srcErr, which the run goroutine sets and the
	// source prober reads.
	srcMu sync.Mutex
	// src is the mirror's source client; srcErr why none could be made.
	src    *syncSource
	srcErr error
}

// syncSource is a mirror's source cluster client, kept across passes and
// replaced when the mirror's connection changes.
type syncSource struct {
	servers string
	cl      *kgo.Client
	admin   *kadm.Client
	key     time.Time // the mirror's updated_at when connected
}

func (r *mirrorSync) stop() {
	r.cancel()
	<-r.done
	<-r.probed
	<-r.schemasDone
}

func (r *mirrorSync) request(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !at.After(r.requested) {
		return
	}
	r.requested = at
	select {
	case r.wake <- struct{}{}:
	default:
	}
	r.wakeSchemas()
}

func (r *mirrorSync) pendingRequest() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requested
}

func (r *mirrorSync) run(ctx context.Context) {
	defer close(r.done)
	defer r.closeSource()
	r.log.Info("metadata sync started")
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	trigger := service.SyncTriggerStart
	for {
		next := r.pass(ctx, trigger)
		if ctx.Err() != nil || !r.lease.Valid() {
			r.log.Info("metadata sync stopped", "cause", context.Cause(ctx))
			return
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			r.log.Info("metadata sync stopped", "cause", context.Cause(ctx))
			return
		case <-timer.C:
			trigger = service.SyncTriggerInterval
		case <-r.wake:
			trigger = service.SyncTriggerRequest
		}
	}
}

// pass runs one sync pass, stores its result while the lease holds, and
// returns the time until the next one.
func (r *mirrorSync) pass(ctx context.Context, trigger string) time.Duration {
	s := r.s
	served := r.pendingRequest()
	start := time.Now()
	m, err := repo.MirrorsGet(ctx, s.cfg.Pool, r.name)
	if err != nil {
		// A deleted mirror's lease is dropped at the next renewal.
		if ctx.Err() == nil && !errors.Is(err, repo.ErrNotFound) {
			r.log.Warn("metadata sync: loading the mirror failed", "err", err)
		}
		return min(s.cfg.DefaultInterval, 5*time.Second)
	}
	p := &syncPass{r: r, ctx: ctx, mirror: m, res: service.SyncResult{Mirror: r.name,
		Instance: s.cfg.InstanceID, Epoch: r.lease.Epoch, Trigger: trigger, StartedAt: start.UTC()}}
	interval := p.run()
	if ctx.Err() != nil {
		return interval // the lease ended mid-pass: its result is not this instance's to store
	}
	res := &p.res
	res.FinishedAt = time.Now().UTC()
	res.DurationMs = time.Since(start).Milliseconds()
	res.OK = allOK(res)
	raw, err := json.Marshal(res)
	if err != nil {
		r.log.Error("metadata sync: encoding the pass result failed", "err", err)
		return interval
	}
	params := repo.MirrorsSaveLastSyncParams{Name: r.name, Owner: r.lease.Owner, Epoch: r.lease.Epoch, Result: raw}
	if !served.IsZero() {
		params.Served = &served
	}
	if !r.lease.Valid() {
		return interval
	}
	saveCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := repo.MirrorsSaveLastSync(saveCtx, s.cfg.Pool, params); errors.Is(err, repo.ErrNotFound) {
		r.log.Info("metadata sync: the lease moved on before the pass result was saved")
	} else if err != nil {
		r.log.Warn("metadata sync: saving the pass result failed", "err", err)
	}
	s.metrics.observe(res)
	attrs := []any{"trigger", trigger, "ok", res.OK, "duration", time.Since(start).Round(time.Millisecond)}
	if res.OK {
		r.log.Debug("metadata sync pass", attrs...)
	} else {
		r.log.Warn("metadata sync pass had errors", append(attrs, "errors", p.errorSummary())...)
	}
	return interval
}

// source returns the mirror's source client, connecting anew when the
// mirror's connection changed since the last pass.
func (r *mirrorSync) source(m repo.Mirror) (*syncSource, error) {
	if src, _ := r.currentSource(); src != nil && src.key.Equal(m.UpdatedAt) {
		return src, nil
	}
	r.closeSource()
	src, err := r.connect(m)
	r.srcMu.Lock()
	r.src, r.srcErr = src, err
	r.srcMu.Unlock()
	return src, err
}

func (r *mirrorSync) connect(m repo.Mirror) (*syncSource, error) {
	conn, err := r.s.cfg.Service.SourceConn(m)
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.WithLogger(kslog.New(r.log.With("client", "sync-source")))}, r.s.cfg.SourceOpts...)
	cl, err := conn.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &syncSource{servers: m.BootstrapServers, cl: cl, admin: kadm.NewClient(cl), key: m.UpdatedAt}, nil
}

// currentSource returns the source client, or why none could be made.
func (r *mirrorSync) currentSource() (*syncSource, error) {
	r.srcMu.Lock()
	defer r.srcMu.Unlock()
	return r.src, r.srcErr
}

func (r *mirrorSync) closeSource() {
	r.srcMu.Lock()
	src := r.src
	r.src, r.srcErr = nil, nil
	r.srcMu.Unlock()
	if src != nil {
		src.cl.Close()
	}
}

// syncMetrics are the kmirror_metadata_sync_* metrics, labelled by mirror
// and sync kind.
type syncMetrics struct {
	passes   *prometheus.CounterVec
	kindOK   *prometheus.GaugeVec
	lastPass *prometheus.GaugeVec
	duration *prometheus.GaugeVec

	mu sync.Mutex
	// seen are the mirrors with series here: the pass counter stays after
	// the lease moves on, and goes only with the mirror (forgetDeleted).
	seen map[string]bool
}

func newSyncMetrics(reg prometheus.Registerer) (*syncMetrics, error) {
	m := &syncMetrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_metadata_sync_passes_total",
			Help: "Metadata sync passes run by this instance, by outcome (ok: every kind succeeded)."}, []string{"mirror", "outcome"}),
		kindOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kmirror_metadata_sync_kind_ok",
			Help: "1 when the last pass kept this kind of metadata in step, 0 when it failed."}, []string{"mirror", "kind"}),
		lastPass: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kmirror_metadata_sync_last_pass_timestamp_seconds",
			Help: "When the last metadata sync pass of the mirror finished."}, []string{"mirror"}),
		duration: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kmirror_metadata_sync_last_pass_duration_seconds",
			Help: "How long the last metadata sync pass of the mirror took."}, []string{"mirror"}),
		seen: map[string]bool{},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.passes, m.kindOK, m.lastPass, m.duration} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("metadata syncer: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *syncMetrics) observe(res *service.SyncResult) {
	outcome := "ok"
	if !res.OK {
		outcome = "error"
	}
	m.mu.Lock()
	m.seen[res.Mirror] = true
	m.mu.Unlock()
	m.passes.WithLabelValues(res.Mirror, outcome).Inc()
	for _, k := range kinds {
		v := 0.0
		if ok, _ := k.status(res); ok {
			v = 1
		}
		m.kindOK.WithLabelValues(res.Mirror, k.name).Set(v)
	}
	m.lastPass.WithLabelValues(res.Mirror).Set(float64(res.FinishedAt.UnixMilli()) / 1000)
	m.duration.WithLabelValues(res.Mirror).Set(float64(res.DurationMs) / 1000)
}

// forget drops a mirror's gauges once another instance syncs it.
func (m *syncMetrics) forget(mirror string) {
	for _, g := range []*prometheus.GaugeVec{m.kindOK, m.lastPass, m.duration} {
		g.DeletePartialMatch(prometheus.Labels{"mirror": mirror})
	}
}

// forgetMirror drops every series of a deleted mirror.
func (m *syncMetrics) forgetMirror(mirror string) {
	m.forget(mirror)
	m.passes.DeletePartialMatch(prometheus.Labels{"mirror": mirror})
	m.mu.Lock()
	delete(m.seen, mirror)
	m.mu.Unlock()
}

// unsynced returns the mirrors with series here that are not synced here.
func (m *syncMetrics) unsynced(syncing []string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name := range m.seen {
		if !slices.Contains(syncing, name) {
			out = append(out, name)
		}
	}
	return out
}

// forgetDeleted drops the series of the mirrors that were deleted, in
// every instance that has some, not only in the one that synced them
// last. It asks Postgres only while this instance has series of mirrors
// it does not sync, by primary key: a mirror synced here is checked once
// its lease ends, when its sync has stopped and cannot add to them again.
func (s *Syncer) forgetDeleted(ctx context.Context) {
	names := s.metrics.unsynced(s.Syncing())
	if len(names) == 0 {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	existing, err := repo.MirrorsExisting(qctx, s.cfg.Pool, names)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Debug("looking for deleted mirrors failed", "err", err)
		}
		return
	}
	for _, name := range names {
		if !slices.Contains(existing, name) {
			s.metrics.forgetMirror(name)
			s.schemaMetrics.forgetMirror(name)
		}
	}
}

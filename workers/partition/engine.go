package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/internal/runtime/notifier"
	"kmirror/internal/runtime/startstop"
	"kmirror/internal/runtime/testsignal"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/lease"
	"kmirror/workers/partition/metrics"
	"kmirror/workers/partition/worker"
)

// RetryPolicy is the FAILED → PREPARING backoff: full jitter, exponential
// (Initial default 1s, Max 300s, MaxAttempts 100). The workers apply it.
type RetryPolicy = worker.RetryPolicy

// EngineConfig wires an Engine.
type EngineConfig struct {
	Pool        *pgxpool.Pool
	Service     *service.Workers
	InstanceID  string
	Destination kafkaconn.Config
	Logger      *slog.Logger
	// DeliveryTimeout bounds how long a produced record may still land; it
	// must be shorter than the lease's safety margin. Default 4s.
	DeliveryTimeout time.Duration
	// CheckpointInterval is how often changed checkpoints are saved, in one
	// statement for the whole instance. Default 1s.
	CheckpointInterval time.Duration
	// OffsetsInterval is how often end offsets are refreshed for lag. Default 2s.
	OffsetsInterval time.Duration
	// DesiredInterval is how often desired states are re-read when no
	// notification says they changed: the fallback poll. Default 5s.
	DesiredInterval time.Duration
	// Notifier, when set, wakes the desired-state cache as soon as a
	// desired state changes.
	Notifier *notifier.Notifier
	Retry    RetryPolicy
	// SourceOpts are extra client options for source clients (tests).
	SourceOpts []kgo.Opt
	// Registerer receives the kmirror_mirrored_* metrics; nil leaves them
	// unregistered.
	Registerer prometheus.Registerer
	// ProduceBuffer bounds the records produced to the destination and not
	// yet answered, across every partition (batchproduce.Gate). Default 100,000.
	ProduceBuffer int64
	// SettledWaitMax is how long copies of an ended session may go
	// unanswered before they are written off (unsettled.go). Default 1m.
	SettledWaitMax time.Duration
	// StopBudget, when set, bounds what stopping waits for (sessions
	// settling, the last checkpoints) by the instance's shutdown budget.
	StopBudget *startstop.Budget
	// SourceState reads the latest value of every key of a cluster's
	// __mirror_state (statetopic.ReadState); a failback
	// (worker/continue.go) reads the source's. Nil: continue cannot prove
	// anything and fails.
	SourceState func(ctx context.Context, conn kafkaconn.Config) (map[string][]byte, error)
}

func (c *EngineConfig) validate() error {
	switch {
	case c.Pool == nil || c.Service == nil:
		return errors.New("engine: Pool and Service are required")
	case c.InstanceID == "":
		return errors.New("engine: InstanceID is required")
	case len(c.Destination.BootstrapServers) == 0:
		return errors.New("engine: a destination cluster is required")
	}
	return nil
}

// Engine runs this instance's partition workers: it implements
// PartitionRunner for the lease manager, and owns the shared Kafka clients
// (one idempotent producer to the destination, one fetcher per mirror).
type Engine struct {
	startstop.Base
	// TestSignals are raised at the points tests wait for or inject faults
	// at; inert unless a test initializes or hooks them before Start.
	TestSignals EngineTestSignals
	cfg         EngineConfig
	log         *slog.Logger
	metrics     *metrics.Metrics
	// gate bounds the copies produced and not yet answered.
	gate *batchproduce.Gate
	// producerHealth tracks the errors the producer retries silently.
	producerHealth *clientHealth
	dstAdmin       *kadm.Client
	// dstAdminClient is dstAdmin's own kgo client (see ensureDestinationTopic).
	dstAdminClient *kgo.Client
	authorizer     *authorizerProbe
	cp             *checkpointer
	prep           prepareSlots
	takeovers      prepareSlots
	// reads are alignment's record reads, grouped per cluster.
	reads   *recordReads
	desired *desiredStates
	// copy holds the mirrors' copy settings and throttles, refreshed with
	// desired.
	copy *copySettings
	// health wakes the mirroring sessions when a client's trouble, or a
	// partition's own, changes; fetchTroubles are the partitions' own
	// fetch troubles (partition_trouble.go).
	health        *healthChanges
	fetchTroubles *partitionTroubles
	// shared are the reads that partitions preparing at the same time
	// share (shared_reads.go).
	shared sharedReads
	// states commits the workers' state changes, and rows reads their
	// partition rows, in groups (grouped_statements.go).
	states *grouped[service.PartitionTransition, repo.Partition]
	// realigns commits the workers' realignments, grouped likewise.
	realigns *grouped[service.PartitionRealignment, repo.Partition]
	rows     *grouped[repo.PartitionID, repo.Partition]

	// wcfg is what each worker is given besides the engine (worker.Config;
	// the test signals are added as it starts).
	wcfg worker.Config

	// batchProducer and batchDst, and each mirror's batchFetchers, copy
	// batches (batch_clients.go).
	batchProducer *batchproduce.Producer
	batchDst      *kgo.Client

	mu            sync.Mutex
	workers       map[lease.Key]*worker.Worker
	batchFetchers map[string]*batchFetcher
	sources       map[string]*sourceClients
	// unsettled are ended sessions' copies still in flight (unsettled.go).
	unsettled map[lease.Key]*unsettledCopies
	// sessions are the running mirroring sessions, for the destination
	// watch; losses are what it found, for each partition's worker to
	// report, and lostTopics when it found each destination topic gone
	// (destination_watch.go).
	sessions   map[lease.Key]*worker.Session
	losses     map[lease.Key]destinationLoss
	lostTopics map[string]time.Time
	// srcStates are the sources' __mirror_state reads of failbacks
	// (source_states.go).
	srcStates sourceStates
}

// StepPoint is where a partition worker is about to take a step.
type StepPoint = worker.StepPoint

// EngineTestSignals are the Engine's points of interest for tests.
type EngineTestSignals struct {
	// BeforeStep: a partition worker is about to take a step. It is raised
	// in the worker's goroutine, so a panic in its hook is the worker's.
	BeforeStep testsignal.Signal[StepPoint]
}

// NewEngine returns an Engine; Start connects it.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.DeliveryTimeout = cmp.Or(cfg.DeliveryTimeout, 4*time.Second)
	cfg.CheckpointInterval = cmp.Or(cfg.CheckpointInterval, time.Second)
	cfg.OffsetsInterval = cmp.Or(cfg.OffsetsInterval, 2*time.Second)
	cfg.DesiredInterval = cmp.Or(cfg.DesiredInterval, 5*time.Second)
	cfg.ProduceBuffer = cmp.Or(cfg.ProduceBuffer, 100_000)
	cfg.SettledWaitMax = cmp.Or(cfg.SettledWaitMax, time.Minute)
	cfg.Retry.Initial = cmp.Or(cfg.Retry.Initial, time.Second)
	cfg.Retry.Max = cmp.Or(cfg.Retry.Max, 300*time.Second)
	cfg.Retry.MaxAttempts = cmp.Or(cfg.Retry.MaxAttempts, 100)
	log := cfg.Logger
	e := &Engine{cfg: cfg, log: log, gate: batchproduce.NewGate(cfg.ProduceBuffer),
		workers: map[lease.Key]*worker.Worker{}, batchFetchers: map[string]*batchFetcher{},
		sources: map[string]*sourceClients{}, unsettled: map[lease.Key]*unsettledCopies{},
		sessions: map[lease.Key]*worker.Session{}, losses: map[lease.Key]destinationLoss{},
		lostTopics: map[string]time.Time{}}
	var err error
	if e.metrics, err = metrics.New(cfg.Registerer); err != nil {
		return nil, err
	}
	e.cp = newCheckpointer(cfg.Pool, cfg.InstanceID, log)
	e.cp.saveDuration = e.metrics.CheckpointSaves()
	e.cp.budget = cfg.StopBudget
	e.prep = newPrepareSlots(cfg.Pool.Config().MaxConns)
	e.takeovers = make(prepareSlots, takeoverSlots)
	e.reads = newRecordReads()
	e.copy = newCopySettings()
	e.desired = newDesiredStates(cfg.Pool).withMetrics(e.metrics).withCopySettings(e.copy)
	e.health = newHealthChanges()
	e.fetchTroubles = newPartitionTroubles()
	e.shared = newSharedReads()
	e.states = newStateWrites(cfg.Service, stateWriteTimeout, log)
	e.realigns = newRealignments(cfg.Service, stateWriteTimeout, log)
	e.rows = newRowReads(cfg.Pool, log)
	e.wcfg = worker.Config{Pool: cfg.Pool, Service: cfg.Service, Destination: cfg.Destination,
		SourceOpts: cfg.SourceOpts, Retry: cfg.Retry, DeliveryTimeout: cfg.DeliveryTimeout,
		SettledWaitMax: cfg.SettledWaitMax, StopBudget: cfg.StopBudget, Logger: log,
		Checkpoints: e.cp, Gate: e.gate, Metrics: e.metrics, Codecs: &recordbatch.Codecs{MaxInflated: recordbatch.DefaultMaxInflated}}
	return e, nil
}

// Start connects the destination producer and admin client, loads the
// desired states, and runs the checkpointer, the desired-state cache and
// the offsets refresher. A failed start closes what it opened.
func (e *Engine) Start(ctx context.Context) (err error) {
	ctx, ok := e.StartInit(ctx)
	if !ok {
		return startstop.ErrStarted
	}
	defer func() {
		if err != nil {
			e.StopInit()
			e.closeClients()
		}
	}()
	// A healthy destination answers a produce within a round trip and
	// its replication; the grace covers a slow one.
	e.producerHealth = newClientHealth(500*time.Millisecond, e.log.With("client", "producer"))
	if err := e.startBatchProducer(); err != nil {
		return fmt.Errorf("destination producer: %w", err)
	}
	if e.dstAdminClient, err = e.cfg.Destination.NewClient(kgo.MetadataMinAge(10 * time.Millisecond)); err != nil {
		return fmt.Errorf("destination admin: %w", err)
	}
	e.dstAdmin = kadm.NewClient(e.dstAdminClient)
	e.authorizer = &authorizerProbe{admin: e.dstAdmin, authenticated: e.cfg.Destination.Security.Authenticated()}
	if err := e.desired.refresh(ctx); err != nil {
		return fmt.Errorf("load desired states: %w", err)
	}
	sub := e.cfg.Notifier.Subscribe(repo.ChannelDesired)
	e.Go(func(ctx context.Context) { e.cp.run(ctx, e.cfg.CheckpointInterval) })
	e.Go(func(ctx context.Context) {
		defer sub.Unsubscribe()
		e.desired.run(ctx, e.cfg.DesiredInterval, sub)
	})
	e.Go(e.refreshOffsetsLoop)
	e.Go(e.refreshForeignEndsLoop)
	e.Go(e.watchHealth)
	e.Go(e.watchClients)
	return nil
}

// watchClients checks the producer's and the fetchers' health every second
// for every mirroring session at once. It runs apart from watchHealth,
// whose destination check waits up to its timeout on a destination that
// does not answer: the sessions hear of trouble within the second all the
// same.
func (e *Engine) watchClients(ctx context.Context) {
	t := time.NewTicker(destinationWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.mu.Lock()
		clients := []*clientHealth{e.producerHealth}
		loops := ""
		for _, f := range e.batchFetchers {
			clients = append(clients, f.health, f.sideHealth)
			loops += f.loops.signature(troubleAfter) + ";"
		}
		e.mu.Unlock()
		e.health.check(clients, troubleAfter, e.fetchTroubles.signature(troubleAfter)+";"+e.producerRetryingSignature()+";"+loops)
	}
}

// producerRetrying is how long, and why, the producer has retried a
// destination partition's copies without an answer, once it has lasted
// troubleAfter.
func (e *Engine) producerRetrying(dstTopic string, partition int32) (time.Time, error) {
	since, err := e.batchProducer.Retrying(dstTopic, partition)
	if err == nil || time.Since(since) < troubleAfter {
		return time.Time{}, nil
	}
	if !errors.Is(err, batchproduce.ErrNoLeader) && !errors.Is(err, batchproduce.ErrNotAnswered) {
		// A request that failed reads the same whatever answered
		// (client_health.go); the producer's hook logged it.
		err = kafkaconn.Public(err, e.cfg.Destination.BootstrapServers)
	}
	return since, fmt.Errorf("retrying %s/%d: %w", dstTopic, partition, err)
}

// producerRetryingSignature names the destination partitions the producer
// has retried for troubleAfter, for the client watch to tell a change.
func (e *Engine) producerRetryingSignature() string {
	var out []string
	for tp, since := range e.batchProducer.RetryingPartitions(troubleAfter) {
		out = append(out, fmt.Sprintf("%s/%d@%d", tp.Topic, tp.Partition, since.UnixNano()))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// watchHealth asks the destination, every second, about copies that went
// unanswered (destination_watch.go).
func (e *Engine) watchHealth(ctx context.Context) {
	t := time.NewTicker(destinationWatchEvery)
	defer t.Stop()
	stalled := map[*batchproduce.Acks]int64{}
	lastSweep := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		checks := e.stalledCopies(stalled)
		if time.Since(lastSweep) >= destinationSweepEvery {
			lastSweep = time.Now()
			checks = append(checks, e.sessionChecks()...)
		}
		e.checkDestination(ctx, checks)
	}
}

// Stop expects the lease manager to have stopped every partition; it stops
// any worker left, saves the last checkpoints and closes the Kafka clients:
// the batch producer fails what is still queued and ends its requests, so
// nothing waits on a destination that does not answer.
func (e *Engine) Stop() {
	if !e.StopInit() {
		return
	}
	e.mu.Lock()
	ws := make([]*worker.Worker, 0, len(e.workers))
	for _, w := range e.workers {
		ws = append(ws, w)
	}
	e.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
	e.Halt()
	e.cp.flush(context.Background())
	// Sessions settled their copies; closing the producer fails what is
	// left unanswered.
	e.closeClients()
}

// closeClients closes the Kafka clients that are open.
func (e *Engine) closeClients() {
	if e.batchProducer != nil {
		e.batchProducer.Close()
		e.batchDst.Close()
	}
	if e.dstAdmin != nil {
		e.dstAdmin.Close()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, f := range e.batchFetchers {
		f.close()
		delete(e.batchFetchers, name)
	}
	for name, s := range e.sources {
		s.close()
		delete(e.sources, name)
	}
}

// StartPartition starts the worker of a newly leased partition.
func (e *Engine) StartPartition(ctx context.Context, l *lease.Lease) {
	cfg := e.wcfg
	cfg.BeforeStep = &e.TestSignals.BeforeStep
	w := worker.New(cfg, workerEngine{e}, l)
	e.mu.Lock()
	if old := e.workers[l.Key]; old != nil {
		e.mu.Unlock()
		old.Stop()
		e.mu.Lock()
	}
	e.workers[l.Key] = w
	e.mu.Unlock()
	go w.Run(ctx)
}

// DeliveryTimeout is how long a copy handed to the producer may take to
// land or fail (lease.PartitionRunner): the lease manager's Trust checks
// it against its margin.
func (e *Engine) DeliveryTimeout() time.Duration { return e.cfg.DeliveryTimeout }

// StopPartition stops a partition's worker gracefully (flushing and saving
// its checkpoint while the lease still holds) and waits for it.
func (e *Engine) StopPartition(k lease.Key) {
	e.mu.Lock()
	w := e.workers[k]
	delete(e.workers, k)
	e.mu.Unlock()
	if w != nil {
		w.Stop()
	}
}

// Running returns the keys of the partitions with a running worker.
func (e *Engine) Running() []lease.Key {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]lease.Key, 0, len(e.workers))
	for k := range e.workers {
		out = append(out, k)
	}
	return out
}

// source returns the mirror's source admin and config, reconnecting when the
// mirror's connection changed. The mirror's row is read afresh, but shared
// with the partitions that ask at the same time: at 10,000 partitions
// preparing at once, one read each would be a seventh of the data pool's
// statements.
func (e *Engine) source(ctx context.Context, mirror string) (*sourceClients, error) {
	m, err := e.shared.mirrors.do(ctx, mirror, func(ctx context.Context) (repo.Mirror, error) {
		return repo.MirrorsGet(ctx, e.cfg.Pool, mirror)
	})
	if err != nil {
		return nil, fmt.Errorf("load mirror %s: %w", mirror, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.sources[mirror]; s != nil {
		if s.key == m.UpdatedAt {
			return s, nil
		}
		s.close()
		delete(e.sources, mirror)
	}
	// Opened only for a new client: a server waiting for a rotated secret
	// key keeps its partitions going on the clients it has.
	conn, err := e.cfg.Service.SourceConn(m)
	if err != nil {
		return nil, err
	}
	cl, err := conn.NewClient(append([]kgo.Opt{kgo.MetadataMinAge(250 * time.Millisecond)}, e.cfg.SourceOpts...)...)
	if err != nil {
		return nil, err
	}
	s := &sourceClients{Source: worker.Source{Conn: conn, Client: cl, Admin: kadm.NewClient(cl)}, key: m.UpdatedAt}
	e.sources[mirror] = s
	return s, nil
}

// sourceClients is a mirror's source connection and clients, made for the
// mirror row last updated at key.
type sourceClients struct {
	worker.Source
	key time.Time
}

func (s *sourceClients) close() { s.Admin.Close() }

// AwaitDestinationPartitions makes the engine's producer read the leaders
// of destination topic topic (the destination's name, with the mirror's
// topic.name.prefix) again, now that it has n partitions. The batch
// producer reads them again anyway when it has a batch for a partition it
// does not know, so nothing waits here.
func (e *Engine) AwaitDestinationPartitions(context.Context, string, int32) error {
	e.batchProducer.RefreshMetadata()
	return nil
}

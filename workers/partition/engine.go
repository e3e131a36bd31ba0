package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// dstAdminClient is dstAdmin's own kgo client (see destinations.ensure).
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
	// rows commits the workers' state changes and realignments, and reads
	// their partition rows, in groups (grouped_statements.go).
	rows *partitionRows
	// topics are the workers' reads and writes of their topics' rows
	// (topic_row_writes.go).
	topics *topicRows

	// wcfg is what each worker is given besides its ports (worker.Config;
	// the test signals are added as it starts).
	wcfg worker.Config

	// batchProducer and batchDst, and each mirror's fetcher (fetchers),
	// copy batches (batch_clients.go).
	batchProducer *batchproduce.Producer
	batchDst      *kgo.Client
	fetchers      *fetchers

	// The components that implement the workers' ports besides the above
	// (worker_ports.go): the destination watch (destination_watch.go,
	// unsettled.go), the copy as the workers use it (copier.go) and the
	// destination cluster's (destination_topics.go).
	watch        *destinationWatch
	copier       *copier
	destinations *destinations

	mu      sync.Mutex
	workers map[lease.Key]*runningWorker
	sources map[string]*sourceClients
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
		workers: map[lease.Key]*runningWorker{},
		sources: map[string]*sourceClients{}}
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
	e.watch = newDestinationWatch(e.desired, e.copy, e.metrics, log, cfg.SettledWaitMax)
	e.health = newHealthChanges()
	e.fetchTroubles = newPartitionTroubles()
	e.fetchers = newFetchers(e.metrics, log, cfg.SourceOpts, e.fetchTroubles)
	e.srcStates.read = cfg.SourceState
	e.shared = newSharedReads()
	e.rows = newPartitionRows(cfg.Service, cfg.Pool, log)
	e.topics = &topicRows{Workers: cfg.Service, pool: cfg.Pool, shared: &e.shared}
	e.wcfg = worker.Config{Retry: cfg.Retry, DeliveryTimeout: cfg.DeliveryTimeout,
		SettledWaitMax: cfg.SettledWaitMax, StopBudget: cfg.StopBudget, Logger: log, Gate: e.gate, Metrics: e.metrics, Codecs: &recordbatch.Codecs{MaxInflated: recordbatch.DefaultMaxInflated}}
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
	e.copier = &copier{producer: e.batchProducer, health: e.producerHealth, settings: e.copy, changes: e.health,
		servers: e.cfg.Destination.BootstrapServers}
	if e.dstAdminClient, err = e.cfg.Destination.NewClient(kgo.MetadataMinAge(10 * time.Millisecond)); err != nil {
		return fmt.Errorf("destination admin: %w", err)
	}
	e.dstAdmin = kadm.NewClient(e.dstAdminClient)
	e.watch.admin = e.dstAdmin
	e.authorizer = &authorizerProbe{admin: e.dstAdmin, authenticated: e.cfg.Destination.Security.Authenticated()}
	e.destinations = &destinations{admin: e.dstAdmin, adminClient: e.dstAdminClient, conn: e.cfg.Destination,
		shared: &e.shared, reads: e.reads, authorizer: e.authorizer, watch: e.watch, log: e.log}
	if err := e.desired.Refresh(ctx); err != nil {
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
		fetchClients, loops := e.fetchers.health()
		clients := append([]*clientHealth{e.producerHealth}, fetchClients...)
		e.health.check(clients, troubleAfter, e.fetchTroubles.signature(troubleAfter)+";"+e.copier.retryingSignature()+";"+loops)
	}
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
		checks := e.watch.stalledCopies(stalled)
		if time.Since(lastSweep) >= destinationSweepEvery {
			lastSweep = time.Now()
			checks = append(checks, e.watch.sessionChecks()...)
		}
		e.watch.checkDestination(ctx, checks)
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
		ws = append(ws, w.w)
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
	e.fetchers.closeAll()
	for name, s := range e.sources {
		s.close()
		delete(e.sources, name)
	}
}

// runningWorker is a partition's worker as the engine keeps it, with the
// epoch of the lease it runs under and how to take it out of the
// destination watch.
type runningWorker struct {
	w          *worker.Worker
	epoch      int64
	unregister func()
}

// StartPartition starts the worker of a newly leased partition.
func (e *Engine) StartPartition(ctx context.Context, l *lease.Lease) {
	cfg := e.wcfg
	cfg.BeforeStep = &e.TestSignals.BeforeStep
	pokes, unregister := e.watch.register(l.Key)
	r := &runningWorker{epoch: l.Epoch, unregister: unregister}
	r.w = worker.New(cfg, e.portsFor(pokes), worker.HeldLease(l))
	e.mu.Lock()
	if old := e.workers[l.Key]; old != nil {
		e.mu.Unlock()
		old.w.Stop()
		old.unregister()
		e.mu.Lock()
	}
	e.workers[l.Key] = r
	e.mu.Unlock()
	go r.w.Run(ctx)
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
		w.w.Stop()
		w.unregister()
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

// AwaitDestinationPartitions makes the engine's producer read the leaders
// of destination topic topic (the destination's name, with the mirror's
// topic.name.prefix) again, now that it has n partitions. The batch
// producer reads them again anyway when it has a batch for a partition it
// does not know, so nothing waits here.
func (e *Engine) AwaitDestinationPartitions(context.Context, string, int32) error {
	e.batchProducer.RefreshMetadata()
	return nil
}

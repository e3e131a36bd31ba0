// Package workertest is the shared harness of the worker packages' tests:
// a test's own database, a source and a destination kfake cluster, the
// service over them, and kmirror instances (lease manager,
// partition engine and, when asked, the metadata syncer) started with short
// lease timings. Only tests import it.
package workertest

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/runtime/notifier"
	"kmirror/internal/runtime/secretbox"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/lease"
	"kmirror/workers/metadatasync"
	"kmirror/workers/partition"
)

// Lease timings of data-plane tests: kgo's shortest record delivery
// timeout is 1s, and it must be shorter than the margin.
const (
	TTL    = 6 * time.Second
	Renew  = 500 * time.Millisecond
	Margin = 2 * time.Second
)

// SyncTimeout bounds each cluster request of a test sync pass: an
// unreachable source costs one of these per pass.
const SyncTimeout = 2 * time.Second

// Env is one data-plane test's world: its own database, a source and
// destination kfake cluster, and the domain's two faces over them.
type Env struct {
	T    *testing.T // nil in benchmarks
	TB   testing.TB
	Pool *pgxpool.Pool
	// Svc is the API's face (a test acts on mirrors and topics through
	// it), Workers the data plane's (the instances' engines and syncers).
	Svc     *service.Control
	Workers *service.Workers
	// Clusters are in this process unless the env was made with
	// devcluster.Config{Process: true} (benchmarks that measure kmirror
	// alone): then Clusters.Source and Destination are nil, topics are
	// made with CreateSourceTopics, and the package's TestMain must call
	// devcluster.ServeIfChild.
	Clusters *devcluster.Clusters
}

// NewEnv starts a test's database and clusters; cleanup closes them.
func NewEnv(t *testing.T, cfg devcluster.Config) *Env {
	t.Helper()
	env := NewEnvTB(t, cfg)
	env.T = t
	return env
}

// NewEnvTB is NewEnv for benchmarks.
func NewEnvTB(tb testing.TB, cfg devcluster.Config) *Env {
	tb.Helper()
	clusters, err := devcluster.Start(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(clusters.Close)
	return NewEnvOn(tb, clusters)
}

// NewEnvOn is NewEnvTB over clusters the caller started and closes, for
// benchmarks whose copies each get a database of their own but share warm
// brokers, as a real deployment's are.
func NewEnvOn(tb testing.TB, clusters *devcluster.Clusters) *Env {
	tb.Helper()
	pool := testdb.Pool(tb)
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(3 * time.Second), Secrets: SecretKeys})
	if err != nil {
		tb.Fatal(err)
	}
	workers, err := service.NewWorkers(service.WorkersConfig{Pool: pool, Secrets: SecretKeys})
	if err != nil {
		tb.Fatal(err)
	}
	return &Env{TB: tb, Pool: pool, Svc: svc, Workers: workers, Clusters: clusters}
}

// EnvOver is an Env over a database the test made itself (a restore's
// fresh one), with svc as its API face and a workers' face over pool.
func EnvOver(t *testing.T, pool *pgxpool.Pool, svc *service.Control, clusters *devcluster.Clusters) *Env {
	t.Helper()
	workers, err := service.NewWorkers(service.WorkersConfig{Pool: pool, Secrets: SecretKeys})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{T: t, TB: t, Pool: pool, Svc: svc, Workers: workers, Clusters: clusters}
}

// SecretKeys seal the source secrets of every env's services, as one key
// file serves all of a deployment's servers: without a key a server refuses
// to store them.
var SecretKeys = func() *secretbox.Keyring {
	text, err := secretbox.NewKeyText()
	if err != nil {
		panic(err)
	}
	k, err := secretbox.ParseKeys([]byte(text))
	if err != nil {
		panic(err)
	}
	return k
}()

// Logger logs warnings to stderr, or everything when KMIRROR_TEST_LOG is
// set.
func Logger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("KMIRROR_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Instance is one running kmirror data plane: leases, engine,
// and the metadata syncer when InstanceOpts.Sync is set.
type Instance struct {
	ID string
	// DataPool is the engine's and syncer's pool: the env's, or with
	// ProductionTimings one of the server's size.
	DataPool *pgxpool.Pool
	Notifier *notifier.Notifier
	Leases   *lease.Manager
	Engine   *partition.Engine
	Syncer   *metadatasync.Syncer // nil without InstanceOpts.Sync
}

// InstanceOpts shape an Instance; zero values take the defaults.
type InstanceOpts struct {
	// Dest is the destination connection; default the env's destination
	// in PLAINTEXT.
	Dest kafkaconn.Config
	// DeliveryTimeout bounds a copy's acknowledgement; default 1 s, short
	// so that fault tests end quickly.
	DeliveryTimeout time.Duration
	// Sync runs the metadata syncer and takes mirror metadata leases.
	Sync bool
	// SyncInterval is the sync interval of mirrors that do not set one;
	// default one hour, so only the first pass and "sync now" run.
	SyncInterval time.Duration
	// EngineSignals and SyncerSignals set up the engine's and the syncer's
	// test signals (Init to wait for them, Hook to inject faults) before
	// the component starts, so that no raise is missed.
	EngineSignals func(*partition.EngineTestSignals)
	SyncerSignals func(*metadatasync.SyncerTestSignals)
	// ProductionTimings runs the leases, checkpoints and offset
	// saves at kmirror server's defaults instead of the tests' short ones,
	// for benchmarks that measure the real load.
	ProductionTimings bool
	// LeaseSignals turns on the lease manager's Lost, Expired and
	// RenewFailed test signals before it starts, so none is missed.
	LeaseSignals bool
	// Registerer receives the engine's and the syncer's metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// Logger is the instance's logger, for tests that read its lines;
	// default Logger().
	Logger *slog.Logger
	// SourceOpts are extra options of the engine's source clients (hooks).
	SourceOpts []kgo.Opt
	// ProduceBuffer is the engine's bound on records produced and not yet
	// answered; zero takes the engine's default.
	ProduceBuffer int64
	// SettledWaitMax is how long an ended session's copies may go
	// unanswered before they are written off; zero takes the default.
	SettledWaitMax time.Duration
	// SourceState reads a source's __mirror_state for a failback
	// (statetopic.ReadState; the harness cannot import it: statetopic's
	// tests import the harness).
	SourceState func(ctx context.Context, conn kafkaconn.Config) (map[string][]byte, error)
	// DestinationRegistry is the deployment's destination Schema Registry
	// (with Sync); nil runs no schema sync.
	DestinationRegistry *schemaregistry.Config
}

// StartInstance runs an instance with short lease timings; it is stopped
// gracefully at cleanup unless the test stopped or crashed it.
func (env *Env) StartInstance(id string) *Instance { return env.StartInstanceOpts(id, InstanceOpts{}) }

// StartInstanceOpts is StartInstance with options.
func (env *Env) StartInstanceOpts(id string, o InstanceOpts) *Instance {
	tb := env.TB
	tb.Helper()
	ctx := context.Background()
	log := cmp.Or(o.Logger, Logger()).With("test", tb.Name(), "instance", id)
	if len(o.Dest.BootstrapServers) == 0 {
		o.Dest = kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}}
	}
	in := &Instance{ID: id}
	// Desired-state changes and sync requests reach the workers through
	// the notifier only: the fallback polls keep their production defaults.
	notes, err := notifier.New(notifier.Config{Listen: repo.Notifications(env.Pool), Channels: repo.Channels, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	if err := notes.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	in.Notifier = notes
	in.DataPool = env.Pool
	dataSvc := env.Workers
	if o.ProductionTimings {
		// The server's data pool, sized as the server sizes it.
		dp, err := repo.OpenWith(ctx, env.Pool.Config().ConnString(), repo.OpenParams{DefaultMaxConns: repo.DataPoolConns, Warm: true})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(dp.Close)
		if dataSvc, err = service.NewWorkers(service.WorkersConfig{Pool: dp, Secrets: SecretKeys}); err != nil {
			tb.Fatal(err)
		}
		in.DataPool = dp
	}
	ecfg := partition.EngineConfig{Pool: in.DataPool, Service: dataSvc, InstanceID: id,
		Destination: o.Dest, Logger: log, DeliveryTimeout: cmp.Or(o.DeliveryTimeout, time.Second), CheckpointInterval: 200 * time.Millisecond,
		OffsetsInterval: 300 * time.Millisecond, Notifier: notes, Registerer: o.Registerer, SourceOpts: o.SourceOpts,
		ProduceBuffer: o.ProduceBuffer, SettledWaitMax: o.SettledWaitMax, SourceState: o.SourceState, Retry: partition.RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second}}
	ttl, renew, margin := TTL, Renew, Margin
	if d := ecfg.DeliveryTimeout; d >= margin-time.Second/2 {
		// lease.Trust refuses a delivery timeout that the margin does not
		// cover: a longer one (a slow destination's test) gets longer
		// leases.
		margin = d + time.Second
		ttl = 3 * margin
	}
	leasePool := env.Pool
	if o.ProductionTimings {
		// Zero values take the components' own defaults, which the server
		// uses, and leases get their own small pool as in the server.
		ecfg.DeliveryTimeout, ecfg.CheckpointInterval, ecfg.OffsetsInterval = 0, 0, 0
		ecfg.Retry = partition.RetryPolicy{}
		ttl, renew, margin = 0, 0, 0
		if leasePool, err = repo.OpenWith(ctx, env.Pool.Config().ConnString(), repo.OpenParams{MaxConns: 2}); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(leasePool.Close)
	}
	eng, err := partition.NewEngine(ecfg)
	if err != nil {
		tb.Fatal(err)
	}
	if o.EngineSignals != nil {
		o.EngineSignals(&eng.TestSignals)
	}
	if err := eng.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	in.Engine = eng
	lcfg := lease.ManagerConfig{Pool: leasePool, InstanceID: id, TTL: ttl,
		RenewInterval: renew, Margin: margin, Logger: log, Partitions: eng, Notifier: notes}
	if o.Sync {
		syncer, err := metadatasync.New(metadatasync.Config{Pool: in.DataPool, Service: dataSvc, InstanceID: id,
			Destination: o.Dest, Logger: log, DefaultInterval: cmp.Or(o.SyncInterval, time.Hour),
			Notifier: notes, Timeout: SyncTimeout, Producer: eng, Registerer: o.Registerer,
			DestinationRegistry: o.DestinationRegistry})
		if err != nil {
			tb.Fatal(err)
		}
		if o.SyncerSignals != nil {
			o.SyncerSignals(&syncer.TestSignals)
		}
		if err := syncer.Start(ctx); err != nil {
			tb.Fatal(err)
		}
		in.Syncer = syncer
		lcfg.Mirrors = syncer
	}
	lm, err := lease.NewManager(lcfg)
	if err != nil {
		tb.Fatal(err)
	}
	if o.LeaseSignals {
		lm.TestSignals.Lost.Init()
		lm.TestSignals.Expired.Init()
		lm.TestSignals.RenewFailed.Init()
	}
	if err := lm.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	in.Leases = lm
	tb.Cleanup(in.Stop)
	return in
}

// Stop stops the instance gracefully: leases handed back after the workers
// flushed, then the clients closed. A second call does nothing.
func (in *Instance) Stop() {
	in.Leases.Stop()
	if in.Syncer != nil {
		in.Syncer.Stop()
	}
	in.Engine.Stop()
	in.Notifier.Stop()
}

// Crash simulates a crash of the instance: its lease loop ends and its
// workers vanish without releasing anything, and its session goes silent
// without marking the instance stopped. Its leases stay in the database
// until they expire. The cleanup registered by StartInstance closes the
// clients.
func (in *Instance) Crash() {
	in.Leases.Crash()
	in.Notifier.Stop()
}

// SortedRunning names the partitions with a running worker, sorted.
func (in *Instance) SortedRunning() []string {
	var out []string
	for _, k := range in.Engine.Running() {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

// CreateMirror creates a mirror over the source and adds topics matching re.
func (env *Env) CreateMirror(name, re string) {
	env.TB.Helper()
	ctx := context.Background()
	if _, err := env.Svc.CreateMirror(ctx, service.MirrorInput{Name: name,
		Source: service.SourceInput{BootstrapServers: env.Clusters.SourceAddr()}}, service.WriteOpts{}); err != nil {
		env.TB.Fatal(err)
	}
	if _, err := env.Svc.AddTopics(ctx, name, service.AddTopicsInput{Topic: re}); err != nil {
		env.TB.Fatal(err)
	}
}

// Partitions returns the describe rows of a mirror.
func (env *Env) Partitions(mirror string) []repo.Partition {
	env.TB.Helper()
	ps, err := repo.PartitionsList(context.Background(), env.Pool, repo.PartitionsListParams{Mirror: mirror})
	if err != nil {
		env.TB.Fatal(err)
	}
	return ps
}

// Partition returns one describe row.
func (env *Env) Partition(mirror, topic string, p int32) repo.Partition {
	env.TB.Helper()
	row, err := repo.PartitionsGet(context.Background(), env.Pool, mirror, topic, p)
	if err != nil {
		env.TB.Fatalf("partition %s/%s/%d: %v", mirror, topic, p, err)
	}
	return row
}

// WaitStates waits until every partition of the mirror is in state.
func (env *Env) WaitStates(mirror string, state service.PartitionState, timeout time.Duration) {
	env.TB.Helper()
	WaitFor(env.TB, timeout, fmt.Sprintf("all partitions of %s %s", mirror, state), func() (bool, string) {
		ps := env.Partitions(mirror)
		desc := ""
		ok := len(ps) > 0
		for _, p := range ps {
			desc += fmt.Sprintf("%s/%d=%s(%s) ", p.Topic, p.Partition, p.State, p.Error)
			if p.State != state {
				ok = false
			}
		}
		return ok, desc
	})
}

// WaitFor polls cond every 20ms until it holds, failing the test after
// timeout with cond's last description.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
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

// HoldsFor is a deliberate observation window: cond must stay true for d
// (checked every 50ms); it fails the test at the first violation.
func HoldsFor(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	for end := time.Now().Add(d); ; {
		if ok, state := cond(); !ok {
			t.Fatalf("%s did not hold: %s", what, state)
		}
		if time.Now().After(end) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

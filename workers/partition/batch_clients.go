package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"

	"kmirror/internal/kafka/batchfetch"
	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/leaders"
	"kmirror/workers/partition/metrics"
	"kmirror/workers/partition/worker"
)

// The engine's copy clients: one batch fetcher per mirror and one batch
// producer to the destination, each over kgo clients whose hooks report
// their health and request metrics.

// defaultFetchMaxWait bounds how long a fetch waits for new records
// (Kafka's own default): a broker loop's long poll of quiet partitions.
const defaultFetchMaxWait = 500 * time.Millisecond

// batchFetcher is a mirror's raw fetcher and its client.
type batchFetcher struct {
	cl   *kgo.Client
	side *kgo.Client
	f    *batchfetch.Fetcher
	// health is cl's, sideHealth side's: a client's requests to a broker
	// of one kind go on one connection, which clientHealth relies on.
	health, sideHealth *clientHealth
	// loops are the fetch loops' own results, per broker: an answer that
	// cannot be used (garbage, a wrong correlation id) completes the
	// request for kgo's hooks, so only the loop sees it fail.
	loops *loopHealth
	users int
}

// loopHealth is batchfetch.Config.Health for one fetcher: a run of
// failures per broker fetch loop.
type loopHealth struct {
	// addr names a broker by its host:port, as the client's hooks saw it.
	addr    func(int32) string
	servers []string // the cluster's bootstrap servers, when addr knows none

	mu      sync.Mutex
	brokers map[int32]*loopRun
}

// loopRun is one broker loop's current run of failed fetches.
type loopRun struct {
	l  *loopHealth
	id int32

	mu    sync.Mutex
	since time.Time // zero when the last fetch succeeded
	err   error
}

var _ batchfetch.Health = (*loopRun)(nil)

// broker is batchfetch.Config.Health.
func (l *loopHealth) broker(id int32) batchfetch.Health { return l.get(id) }

func (l *loopHealth) get(id int32) *loopRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.brokers[id]
	if r == nil {
		r = &loopRun{l: l, id: id}
		l.brokers[id] = r
	}
	return r
}

// Failed implements batchfetch.Health.
func (r *loopRun) Failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since.IsZero() {
		r.since = time.Now()
	}
	r.err = err
}

// Succeeded implements batchfetch.Health.
func (r *loopRun) Succeeded() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.since, r.err = time.Time{}, nil
}

// trouble is the run when it has lasted d; what cannot be spoken to reads
// as the client's other trouble does (kafkaconn.Public).
func (r *loopRun) trouble(d time.Duration) (time.Time, error) {
	r.mu.Lock()
	since, err := r.since, r.err
	r.mu.Unlock()
	if err == nil || time.Since(since) < d {
		return time.Time{}, nil
	}
	servers := r.l.servers
	if a := r.l.addr(r.id); a != "" {
		servers = []string{a}
	}
	return since, kafkaconn.Public(err, servers)
}

// signature names the broker loops in trouble for d, for the client watch
// to tell a change.
func (l *loopHealth) signature(d time.Duration) string {
	l.mu.Lock()
	runs := make([]*loopRun, 0, len(l.brokers))
	for _, r := range l.brokers {
		runs = append(runs, r)
	}
	l.mu.Unlock()
	var b strings.Builder
	for _, r := range runs {
		if since, err := r.trouble(d); err != nil {
			fmt.Fprintf(&b, "%d@%d,", r.id, since.UnixNano())
		}
	}
	return b.String()
}

func (f *batchFetcher) close() {
	f.f.Close()
	f.cl.Close()
	f.side.Close()
}

// startBatchProducer opens the batch producer and its destination client.
func (e *Engine) startBatchProducer() error {
	cl, err := e.cfg.Destination.NewClient(kgo.WithHooks(e.producerHealth), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.WithLogger(kslog.New(e.log.With("client", "producer"))), e.metrics.ProduceOpt())
	if err != nil {
		return err
	}
	// The broker's timeout of a request is the delivery timeout.
	p, err := batchproduce.New(batchproduce.Config{Client: cl, Logger: e.log.With("client", "batch producer"),
		RequestTimeout: e.cfg.DeliveryTimeout})
	if err != nil {
		cl.Close()
		return err
	}
	e.batchDst, e.batchProducer = cl, p
	e.watch.producer = p
	return nil
}

// fetchers are the mirrors' raw fetchers, each made on a mirror's first
// fetch and closed when its last partition leaves, and what the
// partitions' own fetch troubles are.
type fetchers struct {
	metrics  *metrics.Metrics
	log      *slog.Logger
	opts     []kgo.Opt // the sources' extra client options (tests)
	troubles *partitionTroubles

	mu       sync.Mutex
	byMirror map[string]*batchFetcher
}

func newFetchers(m *metrics.Metrics, log *slog.Logger, opts []kgo.Opt, troubles *partitionTroubles) *fetchers {
	return &fetchers{metrics: m, log: log, opts: opts, troubles: troubles, byMirror: map[string]*batchFetcher{}}
}

// get returns the mirror's raw fetcher, creating it on first use.
func (e *fetchers) get(mirror string, conn kafkaconn.Config) (*batchFetcher, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if f := e.byMirror[mirror]; f != nil {
		f.users++
		return f, nil
	}
	// A fetch may be held for its max wait before it is answered.
	flog := e.log.With("client", "batch fetcher", "mirror", mirror)
	health, sideHealth := newClientHealth(defaultFetchMaxWait, flog), newClientHealth(defaultFetchMaxWait, flog)
	loops := &loopHealth{addr: health.addr, servers: conn.BootstrapServers, brokers: map[int32]*loopRun{}}
	opts := append([]kgo.Opt{e.metrics.FetchOpt(mirror)}, batchfetch.ClientOpts(0)...)
	opts = append(opts, e.opts...)
	cl, err := conn.NewClient(append([]kgo.Opt{kgo.WithHooks(health)}, opts...)...)
	if err != nil {
		return nil, err
	}
	// The side client fetches partitions added during a long poll
	// (batchfetch.Config.SideClient); its trouble is the mirror's too.
	side, err := conn.NewClient(append([]kgo.Opt{kgo.WithHooks(sideHealth)}, opts...)...)
	if err != nil {
		cl.Close()
		return nil, err
	}
	bf, err := batchfetch.New(batchfetch.Config{Client: cl, SideClient: side,
		Logger: e.log.With("client", "batch fetcher", "mirror", mirror), MaxWait: defaultFetchMaxWait,
		Health: loops.broker, Trouble: func(topic string, partition int32, err error) {
			e.noteTrouble(mirror, topic, partition, err)
		}})
	if err != nil {
		cl.Close()
		side.Close()
		return nil, err
	}
	f := &batchFetcher{cl: cl, side: side, f: bf, health: health, sideHealth: sideHealth, loops: loops, users: 1}
	e.byMirror[mirror] = f
	return f, nil
}

// release gives up one partition's use of the mirror's fetcher.
func (e *fetchers) release(mirror string) {
	e.mu.Lock()
	f := e.byMirror[mirror]
	if f == nil {
		e.mu.Unlock()
		return
	}
	if f.users--; f.users > 0 {
		e.mu.Unlock()
		return
	}
	delete(e.byMirror, mirror)
	e.mu.Unlock()
	f.close()
}

// health returns the fetch clients' health and the broker loops' trouble
// signature, for the client watch.
func (e *fetchers) health() (clients []*clientHealth, loops string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.byMirror {
		clients = append(clients, f.health, f.sideHealth)
		loops += f.loops.signature(troubleAfter) + ";"
	}
	return clients, loops
}

// closeAll closes every fetcher.
func (e *fetchers) closeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, f := range e.byMirror {
		f.close()
		delete(e.byMirror, name)
	}
}

// fetch registers a partition with its mirror's raw fetcher.
func (e *fetchers) fetch(mirror string, conn kafkaconn.Config, topic string, partition int32, from int64,
	deliver func(worker.FetchBatch)) (worker.Fetch, error) {
	f, err := e.get(mirror, conn)
	if err != nil {
		return nil, err
	}
	ref := troubleRef{mirror: mirror, tp: leaders.TopicPartition{Topic: topic, Partition: partition}}
	f.f.Add(topic, partition, from, func(got batchfetch.Fetched) {
		lso := got.LastStableOffset
		if got.Err != nil {
			lso = -1
		} else {
			e.troubles.answered(ref)
		}
		deliver(worker.FetchBatch{Batches: got.Batches, Aborted: got.Aborted, Err: got.Err, LSO: lso})
	})
	return &batchFetchRegistration{fs: e, f: f, ref: ref}, nil
}

// noteTrouble records a failure of a partition's fetch that the
// mirror's fetcher retries (a request that asked for it failed, or its
// part of an answer could not be used): once the partition's failures
// have lasted troubleAfter with no delivery between, its row says so
// while it stays MIRRORING, and a delivery clears it. The fetcher's
// trouble with a whole broker reaches the rows through its clients' hooks
// (clientHealth); this is for what only the fetcher sees.
func (e *fetchers) noteTrouble(mirror, topic string, partition int32, err error) {
	e.troubles.failed(troubleRef{mirror: mirror, tp: leaders.TopicPartition{Topic: topic, Partition: partition}}, err)
}

// batchFetchRegistration is one partition's place in its mirror's raw
// fetcher.
type batchFetchRegistration struct {
	fs  *fetchers
	f   *batchFetcher
	ref troubleRef
}

// Trouble is the oldest of the partition's own trouble and its mirror's
// fetch clients'.
func (r *batchFetchRegistration) Trouble() (time.Time, error) {
	return oldestTrouble(
		func() (time.Time, error) { return r.fs.troubles.trouble(r.ref, troubleAfter) },
		func() (time.Time, error) {
			if b, ok := r.f.f.Broker(r.ref.tp.Topic, r.ref.tp.Partition); ok {
				return r.f.loops.get(b).trouble(troubleAfter)
			}
			return time.Time{}, nil
		},
		func() (time.Time, error) { return r.f.health.trouble(troubleAfter) },
		func() (time.Time, error) { return r.f.sideHealth.trouble(troubleAfter) })
}

func (r *batchFetchRegistration) Stop() {
	r.f.f.Remove(r.ref.tp.Topic, r.ref.tp.Partition)
	r.fs.troubles.forget(r.ref)
	r.fs.release(r.ref.mirror)
}

// oldestTrouble returns the oldest of the troubles the sources report.
func oldestTrouble(sources ...func() (time.Time, error)) (since time.Time, err error) {
	for _, src := range sources {
		if s, serr := src(); serr != nil && (err == nil || s.Before(since)) {
			since, err = s, serr
		}
	}
	return since, err
}

// errWrittenOff fails the batches of a topic not sent yet when its copies
// are written off.
var errWrittenOff = errors.New("the destination topic's copies were written off")

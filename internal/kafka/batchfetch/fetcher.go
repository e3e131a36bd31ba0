// Package batchfetch reads Kafka partitions as raw record batches,
// read_committed, for a copier that produces them whole. Each broker has
// one fetch loop with an incremental fetch session (KIP-227): after the
// first request, a request names only the partitions whose position moved,
// and the broker answers only for partitions with something new, so a quiet
// partition costs nothing per request.
package batchfetch

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/leaders"
	"kmirror/internal/kafka/recordbatch"
)

// Fetched is what one response held for a partition.
type Fetched struct {
	Topic     string
	Partition int32
	// Batches are the complete batches from the partition's position on,
	// their CRCs checked. The first may start before the position (a
	// broker returns the batch that holds it).
	Batches []recordbatch.Batch
	// Aborted are the transactions the response lists as aborted, for
	// recordbatch.NewCommitted.
	Aborted []recordbatch.Aborted
	// HighWatermark, LastStableOffset and LogStartOffset are the
	// partition's, as the leader answered.
	HighWatermark, LastStableOffset, LogStartOffset int64
	// Err ends the partition's fetching (its offset is out of range, its
	// topic is gone, a batch is corrupt) until it is added again.
	Err error
}

// Config wires a Fetcher.
type Config struct {
	// Client reaches the source cluster; the fetcher uses its metadata
	// and its brokers' connections, not its consumer: every request is a
	// kmsg request that kgo sends, so dialing, TLS, SASL and its renewal,
	// version negotiation and throttle back-off are kgo's.
	Client *kgo.Client
	// SideClient reaches the same cluster on connections of its own, for
	// partitions added while a broker loop's long poll is out: a broker
	// answers a connection's requests in order, so on Client's fetch
	// connection they would wait the poll out. Nil: they wait.
	SideClient *kgo.Client
	Logger     *slog.Logger
	// MaxWait is how long a broker may hold a request for data; default
	// 500ms.
	MaxWait time.Duration
	// MaxBytes bounds a response, PartitionMaxBytes each partition's part
	// of it (a broker still returns a first batch larger than either);
	// defaults 50 MiB and 1 MiB. The clients should be made with
	// ClientOpts(MaxBytes), so that a response is read only up to that.
	MaxBytes, PartitionMaxBytes int32
	// PieceBytes is about how much of one partition's part of a response
	// is handed over before the next partition's turn; default 256 KiB.
	PieceBytes int32
	// RetryBackoff spaces retries after a broker fails a request, doubling
	// at each failure in a row up to MaxRetryBackoff; defaults 250ms and
	// 5s. A broker that answers with garbage fails at once, and without
	// the doubling its loop would ask again four times a second forever.
	RetryBackoff, MaxRetryBackoff time.Duration
	// Health, when set, is told of each broker loop's requests: a broker
	// that keeps failing shows there even while the cluster's other
	// brokers, and its metadata requests, answer (which kgo's hooks see).
	Health func(broker int32) Health
	// Trouble, when set, is told of a partition's error that the fetcher
	// retries by itself once the metadata is read again (a leader moving,
	// a replica not caught up): nothing is delivered meanwhile, so this is
	// the only sign of one that goes on. The next delivery says it ended.
	Trouble func(topic string, partition int32, err error)
}

// Health hears how one broker loop's fetches go.
type Health interface {
	Failed(err error)
	Succeeded()
}

// Fetcher fetches the partitions added to it.
type Fetcher struct {
	cfg  Config
	log  *slog.Logger
	meta *leaders.Cache

	mu    sync.Mutex
	cond  *sync.Cond // signalled when a delivery ends
	parts map[leaders.TopicPartition]*partition
	// unassigned are the partitions waiting for a leader's fetch loop, so
	// that assigning a few added ones does not walk every partition.
	unassigned map[leaders.TopicPartition]*partition
	brokers    map[int32]*brokerLoop
	closed     bool

	wake chan struct{} // the assigner's
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// partition is one added partition's position and where it is fetched.
type partition struct {
	tp     leaders.TopicPartition
	offset int64
	// lastEpoch is the leader epoch of the last batch read, -1 before
	// the first: a fetch names it (LastFetchedEpoch, fetch v12+), and a
	// leader whose log no longer holds that epoch up to offset says where
	// it diverged (truncation.go).
	lastEpoch int32
	deliver   func(Fetched)
	// broker fetches it, -1 while it waits for a leader.
	broker int32
	// stopped: an error was delivered; it is not fetched again.
	stopped    bool
	delivering bool
	// side: its broker loop's side fetch has it (brokerLoop.side); the
	// loop does not ask for it meanwhile.
	side bool
	// boundary: offset is where the last batch read ended, so no batch
	// fetched from it may start before it (after Add, the first batch
	// may: a broker answers with the batch that holds the position).
	boundary bool
	// wantBytes is the partition max bytes to ask for while a batch larger
	// than the default is fetched (0: the default).
	wantBytes int32
}

// maxBytes is what a fetch asks of the partition.
func (p *partition) maxBytes(def int32) int32 { return max(def, p.wantBytes) }

// New returns a started Fetcher.
func New(cfg Config) (*Fetcher, error) {
	if cfg.Client == nil {
		return nil, errors.New("batchfetch: Client is required")
	}
	cfg.MaxWait = cmp.Or(cfg.MaxWait, 500*time.Millisecond)
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, defaultMaxBytes)
	cfg.PartitionMaxBytes = cmp.Or(cfg.PartitionMaxBytes, defaultPartitionMaxBytes)
	cfg.PieceBytes = cmp.Or(cfg.PieceBytes, 256<<10)
	cfg.RetryBackoff = cmp.Or(cfg.RetryBackoff, 250*time.Millisecond)
	cfg.MaxRetryBackoff = max(cmp.Or(cfg.MaxRetryBackoff, 5*time.Second), cfg.RetryBackoff)
	f := &Fetcher{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), meta: leaders.New(cfg.Client),
		parts: map[leaders.TopicPartition]*partition{}, unassigned: map[leaders.TopicPartition]*partition{},
		brokers: map[int32]*brokerLoop{}, wake: make(chan struct{}, 1)}
	f.cond = sync.NewCond(&f.mu)
	f.ctx, f.stop = context.WithCancel(context.Background())
	f.wg.Add(1)
	go f.assign()
	return f, nil
}

// Add fetches a partition from offset, handing each response's part to
// deliver, in order, from one goroutine. deliver must not call Remove or
// Add. Adding a partition already added moves it to offset.
func (f *Fetcher) Add(topic string, part int32, offset int64, deliver func(Fetched)) {
	tp := leaders.TopicPartition{Topic: topic, Partition: part}
	f.mu.Lock()
	for f.parts[tp] != nil && f.parts[tp].delivering {
		f.cond.Wait()
	}
	if old := f.parts[tp]; old != nil && old.broker >= 0 {
		f.brokers[old.broker].drop(tp)
	}
	p := &partition{tp: tp, offset: offset, lastEpoch: -1, deliver: deliver, broker: -1}
	f.parts[tp], f.unassigned[tp] = p, p
	f.mu.Unlock()
	f.signal()
}

// Remove stops fetching a partition. No delivery for it runs once Remove
// returns.
func (f *Fetcher) Remove(topic string, part int32) {
	tp := leaders.TopicPartition{Topic: topic, Partition: part}
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.parts[tp] != nil && f.parts[tp].delivering {
		f.cond.Wait()
	}
	if p := f.parts[tp]; p != nil && p.broker >= 0 {
		f.brokers[p.broker].drop(tp)
	}
	delete(f.parts, tp)
	delete(f.unassigned, tp)
}

// Close stops every fetch loop. The clients are the caller's to close.
func (f *Fetcher) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.stop()
	f.wg.Wait()
}

func (f *Fetcher) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// assign gives each partition waiting for a leader to its leader's fetch
// loop, whenever partitions are added or lose their leader.
func (f *Fetcher) assign() {
	defer f.wg.Done()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-f.wake:
		case <-retry.C:
		}
		if waiting := f.assignOnce(); waiting {
			retry.Reset(f.cfg.RetryBackoff)
		}
	}
}

// assignOnce assigns what it can and reports whether a partition still
// waits for a leader.
func (f *Fetcher) assignOnce() bool {
	f.mu.Lock()
	topics := map[string]bool{}
	for _, p := range f.unassigned {
		if !p.stopped {
			topics[p.tp.Topic] = true
		}
	}
	f.mu.Unlock()
	if len(topics) == 0 {
		return false
	}
	leaderOf, err := f.meta.Leaders(f.ctx, topics)
	if err != nil {
		f.log.Warn("batch fetcher: source metadata; retrying", "err", err)
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	waiting := false
	for tp, p := range f.unassigned {
		if p.broker >= 0 || p.stopped {
			delete(f.unassigned, tp)
			continue
		}
		l, ok := leaderOf[p.tp]
		if !ok {
			waiting = true
			f.meta.Stale()
			continue
		}
		b := f.brokers[l.Broker]
		if b == nil {
			b = newBrokerLoop(f, l.Broker)
			f.brokers[l.Broker] = b
			f.wg.Add(1)
			go b.run()
		}
		p.broker = l.Broker
		delete(f.unassigned, tp)
		b.add(p.tp, l)
	}
	return waiting
}

// unassign takes a partition off its broker (its leader moved) and hands
// it back to the assigner.
func (f *Fetcher) unassignLocked(tp leaders.TopicPartition) {
	if p := f.parts[tp]; p != nil {
		p.broker = -1
		f.unassigned[tp] = p
	}
	f.meta.Stale()
	f.signal()
}

// refetch errors are a partition's to fetch again once the metadata is
// read again, maybe from another leader: kerr decides what is retriable,
// as kgo's consumer asks it. A topic the broker does not know (by name or
// id) or knows under another id is not waited out: it was deleted or
// recreated, and the copier is told.
func refetch(err error) bool {
	return kerr.IsRetriable(err) && !errors.Is(err, kerr.UnknownTopicOrPartition) &&
		!errors.Is(err, kerr.UnknownTopicID) && !errors.Is(err, kerr.InconsistentTopicID)
}

// Broker returns the broker whose loop fetches a partition, if one does.
func (f *Fetcher) Broker(topic string, part int32) (int32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.parts[leaders.TopicPartition{Topic: topic, Partition: part}]
	if p == nil || p.broker < 0 {
		return 0, false
	}
	return p.broker, true
}

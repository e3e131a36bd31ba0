package partition

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafkaconn"
)

// fetchBatch is what one poll returned for one partition.
type fetchBatch struct {
	records []*kgo.Record
	err     error
	// lso is the source's last stable offset (read_committed end), -1 unknown.
	lso int64
}

// fetchSink receives a partition's batches. The fetch loop calls deliver in
// its own goroutine, as a plain copy loop would produce right after its
// poll: handing each batch to the partition's worker through a channel cost
// a goroutine wake-up per partition per poll, about a quarter of a
// millisecond of mirroring latency (docs/benchmarks.md, "Latency").
// deliver must not block for long: it may only wait on the producer's
// buffer, which every produce's deadline bounds.
type fetchSink struct {
	deliver func(fetchBatch)
}

type topicPartition struct {
	topic     string
	partition int32
}

// fetchCmd adds (offset >= 0) or removes (sink nil) a partition; applied
// between polls so a poll's records always belong to the current assignment.
type fetchCmd struct {
	tp     topicPartition
	offset int64
	sink   *fetchSink
	ack    chan struct{}
}

// mirrorFetcher is the one read_committed source client of an (instance,
// mirror): partitions are added and removed as leases come and go, and each
// poll's records are handed to the partitions' workers.
type mirrorFetcher struct {
	mirror string
	cl     *kgo.Client
	log    *slog.Logger
	health *clientHealth

	mu      sync.Mutex
	pending []fetchCmd
	wake    chan struct{}
	// users counts the partitions registered, for closing idle fetchers.
	users int

	cancel context.CancelFunc
	done   chan struct{}
}

func newMirrorFetcher(mirror string, conn kafkaconn.Config, log *slog.Logger, extra ...kgo.Opt) (*mirrorFetcher, error) {
	opts := append([]kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers are handed to the workers (never produced),
		// so a checkpoint can pass a partition's last marker and lag
		// reaches 0.
		kgo.KeepControlRecords(),
		// Out of range must surface as an error: a silent reset would skip
		// records. Alignment then counts them as lost, visibly.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(defaultFetchMaxWait),
	}, extra...)
	health := &clientHealth{}
	opts = append(opts, kgo.WithHooks(health))
	cl, err := conn.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &mirrorFetcher{mirror: mirror, cl: cl, log: log, health: health, wake: make(chan struct{}, 1),
		cancel: cancel, done: make(chan struct{})}
	go f.run(ctx)
	return f, nil
}

// add starts fetching a partition at offset into sink, returning once the
// fetch loop has applied it.
func (f *mirrorFetcher) add(tp topicPartition, offset int64, sink *fetchSink) {
	f.do(fetchCmd{tp: tp, offset: offset, sink: sink, ack: make(chan struct{})})
}

// remove stops fetching a partition: once it returns, the sink is called no
// more. The caller must not hold anything its sink's deliver waits for.
func (f *mirrorFetcher) remove(tp topicPartition) {
	f.do(fetchCmd{tp: tp, offset: -1, ack: make(chan struct{})})
}

func (f *mirrorFetcher) do(c fetchCmd) {
	f.mu.Lock()
	f.pending = append(f.pending, c)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	select {
	case <-c.ack:
	case <-f.done:
	}
}

func (f *mirrorFetcher) close() {
	f.cancel()
	<-f.done
	f.cl.Close()
}

func (f *mirrorFetcher) run(ctx context.Context) {
	defer close(f.done)
	sinks := map[topicPartition]*fetchSink{}
	for ctx.Err() == nil {
		f.apply(sinks)
		if len(sinks) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-f.wake:
				continue
			}
		}
		// A command cancels the poll so it is applied promptly.
		pollCtx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-f.wake:
				cancel()
			case <-pollCtx.Done():
			}
		}()
		fetches := f.cl.PollFetches(pollCtx)
		cancel()
		if fetches.IsClientClosed() {
			return
		}
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			sink := sinks[topicPartition{p.Topic, p.Partition}]
			if sink == nil || (len(p.Records) == 0 && p.Err == nil && p.LastStableOffset < 0) {
				return
			}
			if p.Err == context.Canceled || p.Err == context.DeadlineExceeded {
				return
			}
			sink.deliver(fetchBatch{records: p.Records, err: p.Err, lso: p.LastStableOffset})
		})
		// No wake-up is re-sent here: the next turn applies whatever is
		// pending first. Re-sending one on every turn cancelled each poll at
		// once, and an idle fetcher spun on a core.
	}
}

// apply runs the queued add/remove commands against the client, in as few
// calls as it can: kgo reassigns every partition on each call, and at
// 10,000 partitions one call per partition made a graceful stop take 6-14 s,
// long enough for every lease to expire meanwhile (docs/benchmarks.md,
// "Partitions per instance").
func (f *mirrorFetcher) apply(sinks map[topicPartition]*fetchSink) {
	f.mu.Lock()
	cmds := f.pending
	f.pending = nil
	f.mu.Unlock()
	var b assignBatch
	var acks []chan struct{}
	for _, c := range cmds {
		if b.touches(c.tp) {
			// The same partition twice (removed, then added again): the
			// first change must reach the client before the second.
			b.flush(f.cl)
		}
		_, had := sinks[c.tp]
		if had {
			b.remove(c.tp)
			delete(sinks, c.tp)
		}
		if c.sink != nil {
			sinks[c.tp] = c.sink
			b.add(c.tp, c.offset)
		}
		acks = append(acks, c.ack)
	}
	b.flush(f.cl)
	for _, ack := range acks {
		close(ack)
	}
}

// assignBatch gathers partition removals and additions for one call each.
type assignBatch struct {
	removes map[string][]int32
	adds    map[string]map[int32]kgo.Offset
	touched map[topicPartition]bool
}

func (b *assignBatch) touches(tp topicPartition) bool { return b.touched[tp] }

func (b *assignBatch) remove(tp topicPartition) {
	if b.removes == nil {
		b.removes, b.touched = map[string][]int32{}, map[topicPartition]bool{}
	}
	b.removes[tp.topic] = append(b.removes[tp.topic], tp.partition)
	b.touched[tp] = true
}

func (b *assignBatch) add(tp topicPartition, offset int64) {
	if b.adds == nil {
		b.adds = map[string]map[int32]kgo.Offset{}
	}
	if b.touched == nil {
		b.touched = map[topicPartition]bool{}
	}
	if b.adds[tp.topic] == nil {
		b.adds[tp.topic] = map[int32]kgo.Offset{}
	}
	b.adds[tp.topic][tp.partition] = kgo.NewOffset().At(offset)
	b.touched[tp] = true
}

// flush applies the removals, then the additions, and starts over.
func (b *assignBatch) flush(cl *kgo.Client) {
	if len(b.removes) > 0 {
		cl.RemoveConsumePartitions(b.removes)
	}
	if len(b.adds) > 0 {
		cl.AddConsumePartitions(b.adds)
	}
	*b = assignBatch{}
}

// defaultFetchMaxWait bounds how long a fetch waits for new records, and so
// how soon an idle fetcher notices commands.
const defaultFetchMaxWait = 500 * time.Millisecond

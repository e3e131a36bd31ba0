package partition

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/runtime/kafkaconn"
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
// poll: handing each batch to the partition's worker through a channel
// would cost a goroutine wake-up per partition per poll, about a quarter of
// a millisecond of mirroring latency (docs/benchmarks/latency.md, "Latency").
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
	// parkFor (under mu) is how long a removed partition stays parked.
	parkFor time.Duration
	// addLinger (under mu) is how long an add waits for others (apply).
	addLinger time.Duration
	// addCalls counts the client calls that added partitions (tests read
	// it once an add has returned).
	addCalls int
	// parked and next belong to the fetch loop (see apply).
	parked map[topicPartition]parkedPartition
	// next is where kgo's cursor of each assigned partition stands, as far
	// as the loop knows: after the last record it was handed, or -1 once
	// an error made that unknown.
	next map[topicPartition]int64
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
		// kgo retries a partition error such as UNKNOWN_TOPIC_ID silently;
		// kept, the run loop passes on the ones that say the source lost
		// the topic (a cluster rebuilt, a topic recreated), so that is
		// said within seconds, and counts the rest in the fetcher's health.
		kgo.KeepRetryableFetchErrors(),
	}, extra...)
	health := &clientHealth{}
	opts = append(opts, kgo.WithHooks(health))
	cl, err := conn.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &mirrorFetcher{mirror: mirror, cl: cl, log: log, health: health, wake: make(chan struct{}, 1),
		parked: map[topicPartition]parkedPartition{}, parkFor: defaultParkFor, addLinger: defaultAddLinger,
		next:   map[topicPartition]int64{},
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
		var turns []*recordTurn
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err == context.Canceled || p.Err == context.DeadlineExceeded {
				return
			}
			if p.Err != nil && !sourceLost(p.Err) && kerr.IsRetriable(p.Err) {
				// kgo retries it (a leader moving, a broker restarting);
				// only a lasting run shows, as the fetcher's trouble.
				f.health.failed(p.Err)
				return
			}
			tp := topicPartition{p.Topic, p.Partition}
			f.track(tp, p)
			sink := sinks[tp]
			if sink == nil || (len(p.Records) == 0 && p.Err == nil && p.LastStableOffset < 0) {
				return
			}
			turns = append(turns, &recordTurn{sink: sink, rest: p.Records, err: p.Err, lso: p.LastStableOffset})
		})
		deliverInTurns(turns)
		// No wake-up is re-sent here: the next turn applies whatever is
		// pending first. Re-sending one on every turn cancelled each poll at
		// once, and an idle fetcher spun on a core.
	}
}

// pieceBytes is about how much of one partition's records a poll hands
// over before the next partition's turn (deliverInTurns).
const pieceBytes = 256 << 10

// recordTurn is what is left to hand over of one partition's records from
// a poll.
type recordTurn struct {
	sink *fetchSink
	rest []*kgo.Record
	err  error
	lso  int64
}

// deliverInTurns hands the partitions' records on in turns, about
// pieceBytes of each in each round (at least one record), so that a
// mirror's throttle, which holds every delivery up, paces the partitions
// evenly: handing on each partition's part whole let one partition's
// megabyte go before the next one's started. A partition's error goes
// with its last piece.
func deliverInTurns(turns []*recordTurn) {
	for len(turns) > 0 {
		next := turns[:0]
		for _, t := range turns {
			n, bytes := 0, 0
			for n < len(t.rest) && (n == 0 || bytes+len(t.rest[n].Key)+len(t.rest[n].Value) <= pieceBytes) {
				bytes += len(t.rest[n].Key) + len(t.rest[n].Value)
				n++
			}
			b := fetchBatch{records: t.rest[:n:n], lso: t.lso}
			if t.rest = t.rest[n:]; len(t.rest) > 0 {
				next = append(next, t)
			} else {
				b.err = t.err
			}
			t.sink.deliver(b)
		}
		turns = next
	}
}

// sourceLost says whether a fetch error means the source no longer has the
// partition as it was mirrored: the session ends, and alignment says why.
func sourceLost(err error) bool {
	return errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition)
}

// apply runs the queued add/remove commands against the client, in as few
// calls as it can: kgo reassigns every partition on each call, and at
// 10,000 partitions one call per partition makes a graceful stop take
// 6-14 s, long enough for every lease to expire meanwhile
// (docs/benchmarks/scale.md, "Partitions per instance").
//
// A removed partition is parked rather than taken out of the client: kgo
// stops its whole consumer session to remove one, which kills the fetch in
// flight and drops what is buffered for every other partition of the
// mirror, so each pause of one topic would cost the mirror's other topics
// their fetch pipeline (docs/benchmarks/control-plane.md, "Pausing a topic's
// neighbours").
// Pausing the partition in kgo costs nothing of the kind. Added back at the
// offset its cursor stands at, a parked partition is just resumed; at any
// other offset it is removed and added again. Partitions parked for
// parkFor are removed in one call.
//
// Adds wait addLinger for others first: each call that adds partitions
// makes kgo load metadata before it fetches them, at most once every
// 10 ms, so a topic's partitions that reach MIRRORING a millisecond apart
// would otherwise be fetched 10-20 ms apart, the first alone in 1 MB
// fetches meanwhile (docs/benchmarks/throughput.md, "Mirroring throughput").
func (f *mirrorFetcher) apply(sinks map[topicPartition]*fetchSink) {
	f.mu.Lock()
	if slices.ContainsFunc(f.pending, func(c fetchCmd) bool { return c.sink != nil }) && f.addLinger > 0 {
		linger := f.addLinger
		f.mu.Unlock()
		time.Sleep(linger)
		f.mu.Lock()
	}
	cmds := f.pending
	f.pending = nil
	parkFor := f.parkFor
	f.mu.Unlock()
	var b assignBatch
	var acks []chan struct{}
	for _, c := range cmds {
		if b.touches(c.tp) {
			// The same partition twice (removed, then added again): the
			// first change must reach the client before the second.
			f.flush(&b)
		}
		if _, had := sinks[c.tp]; had {
			delete(sinks, c.tp)
			b.pause(c.tp)
			f.parked[c.tp] = parkedPartition{next: f.next[c.tp], since: time.Now()}
		}
		if c.sink != nil {
			sinks[c.tp] = c.sink
			if p, ok := f.parked[c.tp]; ok {
				delete(f.parked, c.tp)
				if p.next >= 0 && p.next == c.offset {
					b.resume(c.tp)
					acks = append(acks, c.ack)
					continue
				}
				b.remove(c.tp)
				b.resume(c.tp) // after the removal: the pause outlives it
			}
			b.add(c.tp, c.offset)
			f.next[c.tp] = c.offset
		}
		acks = append(acks, c.ack)
	}
	f.sweep(&b, parkFor)
	f.flush(&b)
	for _, ack := range acks {
		close(ack)
	}
}

// flush applies a batch of changes to the client.
func (f *mirrorFetcher) flush(b *assignBatch) {
	if len(b.adds) > 0 {
		f.addCalls++
	}
	b.flush(f.cl)
}

// defaultAddLinger is how long an add waits for the others of its burst
// (apply): a new topic's partitions reach MIRRORING within a millisecond or
// two of each other.
const defaultAddLinger = 2 * time.Millisecond

// defaultParkFor is how long a removed partition stays paused in the client
// before it is taken out: long enough for a pause and resume, or a restart,
// to find it there.
const defaultParkFor = 30 * time.Second

// parkedPartition is a removed partition still assigned in the client,
// paused, with its cursor at next (-1 if unknown).
type parkedPartition struct {
	next  int64
	since time.Time
}

// sweep queues the removal of partitions parked for parkFor or longer.
func (f *mirrorFetcher) sweep(b *assignBatch, parkFor time.Duration) {
	for tp, p := range f.parked {
		if time.Since(p.since) < parkFor || b.touches(tp) {
			continue
		}
		delete(f.parked, tp)
		delete(f.next, tp)
		b.remove(tp)
		b.resume(tp)
	}
}

// track follows where kgo's cursor of a partition stands after a poll: past
// the last record handed over. Records a read_committed fetch filtered out,
// or that compaction removed, can put the cursor further; the offsets
// between do not exist for the loop either way, so resuming there skips
// nothing. After an error the position is unknown.
func (f *mirrorFetcher) track(tp topicPartition, p kgo.FetchTopicPartition) {
	if _, ok := f.next[tp]; !ok {
		return
	}
	switch {
	case p.Err != nil:
		f.next[tp] = -1
	case len(p.Records) > 0:
		f.next[tp] = p.Records[len(p.Records)-1].Offset + 1
	}
}

// assignBatch gathers partition changes for one client call of each kind.
type assignBatch struct {
	removes, pauses, resumes map[string][]int32
	adds                     map[string]map[int32]kgo.Offset
	touched                  map[topicPartition]bool
}

func (b *assignBatch) touches(tp topicPartition) bool { return b.touched[tp] }

func (b *assignBatch) touch(tp topicPartition) {
	if b.touched == nil {
		b.touched = map[topicPartition]bool{}
	}
	b.touched[tp] = true
}

func (b *assignBatch) remove(tp topicPartition) {
	b.removes = appendPartition(b.removes, tp)
	b.touch(tp)
}
func (b *assignBatch) pause(tp topicPartition) { b.pauses = appendPartition(b.pauses, tp); b.touch(tp) }
func (b *assignBatch) resume(tp topicPartition) {
	b.resumes = appendPartition(b.resumes, tp)
	b.touch(tp)
}

func appendPartition(m map[string][]int32, tp topicPartition) map[string][]int32 {
	if m == nil {
		m = map[string][]int32{}
	}
	m[tp.topic] = append(m[tp.topic], tp.partition)
	return m
}

func (b *assignBatch) add(tp topicPartition, offset int64) {
	if b.adds == nil {
		b.adds = map[string]map[int32]kgo.Offset{}
	}
	if b.adds[tp.topic] == nil {
		b.adds[tp.topic] = map[int32]kgo.Offset{}
	}
	b.adds[tp.topic][tp.partition] = kgo.NewOffset().At(offset)
	b.touch(tp)
}

// flush applies the pauses, the removals, the additions and then the
// resumptions, and starts over. A partition both removed and resumed is
// added back (if it is) before its pause is lifted, so its old cursor
// never fetches again.
func (b *assignBatch) flush(cl *kgo.Client) {
	if len(b.pauses) > 0 {
		cl.PauseFetchPartitions(b.pauses)
	}
	if len(b.removes) > 0 {
		cl.RemoveConsumePartitions(b.removes)
	}
	if len(b.adds) > 0 {
		cl.AddConsumePartitions(b.adds)
	}
	if len(b.resumes) > 0 {
		cl.ResumeFetchPartitions(b.resumes)
	}
	*b = assignBatch{}
}

// defaultFetchMaxWait bounds how long a fetch waits for new records (Kafka's
// own default). A command cancels the loop's poll at once, but a resumed
// partition joins only the next fetch request, so on a mirror with no
// traffic this is how long its first fetch can wait.
const defaultFetchMaxWait = 500 * time.Millisecond

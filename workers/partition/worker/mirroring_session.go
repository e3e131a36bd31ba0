package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kmirror/internal/kafka/batchfetch"
	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/partition/metrics"
)

// session is one stretch of MIRRORING: fetch, produce, verify acks.
// Batches arrive in the mirror's fetch goroutine (deliver) and results in
// the worker's; mu serializes the two until the worker closes the session.
type session struct {
	mu     sync.Mutex
	closed bool
	// closing is closed when the worker closes the session: a delivery
	// waiting for the throttle gives up.
	closing chan struct{}
	// halted wakes the worker when a delivered batch failed or fell out of
	// range.
	halted chan struct{}

	w *Worker
	// dest is the destination topic the session writes (Worker.dest),
	// fixed for its life: the engine reads it to find the sessions a
	// destination topic's loss or write-off concerns.
	dest      string
	srcNext   int64 // next source offset whose copy is acknowledged
	dstNext   int64 // next destination offset expected
	fetchNext int64 // next source offset to produce
	produced  int64 // next destination offset to assign
	pending   []pendingRun
	// stamps are the copied batches not yet acknowledged, oldest first,
	// each with its first record's timestamp: the first one left after
	// srcNext is the oldest record not yet on the destination (lag in
	// time), known from the fetch at no cost.
	stamps []batchStamp
	// waiting is the first batch of a delivery that has waited a second or
	// more for the mirror's throttle, when it is plain data (neither a
	// marker nor transactional, which may be aborted) at or past fetchNext:
	// while nothing copied is unacknowledged, it is the oldest record not
	// yet on the destination.
	waiting *batchStamp
	acks    *batchproduce.Acks
	// taken counts the results taken from acks so far (verified ones, then
	// any after a failure).
	taken   int64
	run     *repo.OffsetRun
	changed []repo.OffsetRun
	srcEnd  int64
	// publishedEnd is the source end last handed to the checkpointer;
	// publishedOldest says whether that hand-over had the oldest uncopied
	// record for the srcNext it had.
	publishedEnd    int64
	publishedOldest bool
	failure         error
	// reported is the fetch or produce trouble last written to the row
	// ("" none), and reportedSides whose it was.
	reported      string
	reportedSides troubleSides
	// outOfRange: the source no longer has the next offset (retention
	// removed it before it was mirrored): re-align in place and go on.
	outOfRange bool
	// topicRecreated: a produce failed with UNKNOWN_TOPIC_ID, so the
	// destination topic was deleted and created again under the producer.
	topicRecreated bool
	// sequenceLost: a produce failed because the destination no longer
	// follows the producer's sequence (OUT_OF_ORDER_SEQUENCE_NUMBER,
	// UNKNOWN_PRODUCER_ID): a destination rebuilt empty under it, or the
	// producer's state expired there. The producer starts a new epoch;
	// re-aligning finds what landed.
	sequenceLost bool
	// partitionUnknown: the producer's metadata predates the partition
	// (the topic just grew).
	partitionUnknown bool
	// interrupted is set when the engine ends the session from outside
	// (the destination lost its records, or copies were written off): the
	// worker re-aligns in place instead of failing (the engine's
	// destination_watch.go).
	interrupted *Interruption
	// produceCtx is every record's context. It ends with the lease, at the
	// first failed or misplaced copy, when a batch outlives the delivery
	// timeout, and when the session ends. Once it has, kgo fails each
	// unsent record when it reaches the head of the partition's queue, with
	// every record queued after it, and no batch waits for produce room
	// (batchproduce.Gate); records queued behind a batch in flight may still go
	// out, in order after it. One context for all is what keeps the
	// destination in order: with a deadline of its own per batch, kgo
	// could fail a late batch while a later one, produced before its
	// worker sees the failure, goes out at the offsets the late one should
	// have had, and alignment would find a destination it cannot explain.
	produceCtx    context.Context
	produceCancel context.CancelCauseFunc
	// deadlines are the batches' delivery timers, oldest first, each armed
	// when its batch is first sent (sentBatch); each ends
	// produceCtx unless every record up to destination offset upTo is
	// settled by then.
	deadlines []*batchDeadline
	// progress fails the copies not yet sent when none of the session's
	// copies is answered for a delivery timeout (watchProgress).
	progress progressWatch
	// behindSince is when the partition last fell behind the source's end
	// (zero while caught up).
	behindSince time.Time
	// shownBacklog: the row showed lag when the session started (the
	// change to MIRRORING stores the ends alignment found), so its catch-up
	// is saved early however quick it was; describe would otherwise show
	// that lag for a checkpoint interval after the partition caught up.
	shownBacklog bool
	// mirrored counts verified copies in the topic's metrics; countedBytes
	// is the acks' verified bytes already counted.
	mirrored     metrics.Topic
	countedBytes int64
	// throttledMs is how long the partition's copies have waited for the
	// mirror's throttle, since it was added: its row's figure when the
	// session began, plus the session's waits.
	throttledMs atomic.Int64
}

// pendingRun is what a session has sent and not yet seen acknowledged: n
// records whose source offsets and destination offsets both follow on
// from src and dst, or n source offsets that are never produced (control):
// a transaction marker, or a copied batch's markers and aborted records. A fetched batch is usually one run, so the bookkeeping
// is per batch rather than per record.
type pendingRun struct {
	src, dst int64
	n        int64
	control  bool
}

// batchStamp is a copied batch's first source offset copied, the offset
// after it, and its first record's timestamp (ms).
type batchStamp struct {
	src, next int64
	ts        int64
}

// oldest is the oldest record not yet on the destination as far as the
// session knows it: the first copied batch not acknowledged, if it has one,
// else the batch waiting for the throttle. Batches are acknowledged whole,
// so srcNext never stops inside one, and what lies between srcNext and that
// batch (markers, aborted records) is no data. Nil when neither is known:
// caught up, or the next records are not fetched yet (lag in time is then
// unknown until the next publish that has one).
func (s *session) oldest() *repo.OldestUncopied {
	i := 0
	for i < len(s.stamps) && s.stamps[i].next <= s.srcNext {
		i++
	}
	s.stamps = s.stamps[i:]
	first := s.waiting
	if len(s.stamps) > 0 {
		first = &s.stamps[0]
	}
	if first == nil || first.next <= s.srcNext {
		return nil
	}
	at := time.UnixMilli(first.ts)
	return &repo.OldestUncopied{Src: s.srcNext, At: &at}
}

// noteWaiting records b's first batch as the one waiting for the throttle
// (session.waiting), if it is plain data at or past fetchNext; s.mu is held.
func (s *session) noteWaiting(b FetchBatch) {
	for i := range b.Batches {
		bt := &b.Batches[i]
		if bt.NextOffset() <= s.fetchNext {
			continue
		}
		if !bt.Control() && !bt.Transactional() && bt.BaseOffset >= s.fetchNext {
			s.waiting = &batchStamp{src: bt.BaseOffset, next: bt.NextOffset(), ts: bt.FirstRecordTimestamp()}
		}
		return
	}
}

type batchDeadline struct {
	upTo int64
	// timer is set when the batch is first sent, in the producer's
	// goroutine; nil before.
	timer atomic.Pointer[time.Timer]
}

// stop stops the deadline's timer, if it was armed. One armed after this
// (the batch sent meanwhile) finds its copies settled when it fires, and
// does nothing.
func (d *batchDeadline) stop() {
	if t := d.timer.Load(); t != nil {
		t.Stop()
	}
}

// sentBatch is a batch handed to the producer with its delivery deadline,
// which its first send arms (batchproduce.FirstSender): time spent queued
// behind the partition's earlier batches, or the other partitions', is not
// in flight and does not count. A queued batch is never sent once the
// session's produce context ends, so the deadline still bounds everything
// that could land.
type sentBatch struct {
	*recordbatch.Batch
	s *session
	d *batchDeadline
}

// FirstSent implements batchproduce.FirstSender.
func (b sentBatch) FirstSent() {
	s, upTo := b.s, b.d.upTo
	b.d.timer.Store(time.AfterFunc(s.w.cfg.DeliveryTimeout, func() {
		if s.acks.Base()+s.acks.Done() < upTo {
			s.produceCancel(errDeliveryTimeout)
		}
	}))
}

// progressWatch is a session's timer for copies that wait to be sent: it
// runs only while some of its copies have no result.
type progressWatch struct {
	armed atomic.Bool
	timer atomic.Pointer[time.Timer] // made at the first arming
	last  atomic.Int64
}

// watchProgress arms the progress watch if it is not armed; s.mu is held.
// A batch's delivery deadline runs from its first send (sentBatch), so a
// batch that cannot be sent at all (the destination gone: no connection,
// no producer id) would wait in the producer's queue for as long as the
// outage lasts. The watch ends produceCtx instead, as the deadline did,
// when a whole delivery timeout passes with copies waiting and none of the
// session's answered; copies queued behind ones that are answered, as
// when a backlog is let through at once, do not fail.
func (s *session) watchProgress() {
	if !s.progress.armed.CompareAndSwap(false, true) {
		return
	}
	s.progress.last.Store(s.acks.Base() + s.acks.Done())
	if t := s.progress.timer.Load(); t != nil {
		t.Reset(s.w.cfg.DeliveryTimeout)
		return
	}
	s.progress.timer.Store(time.AfterFunc(s.w.cfg.DeliveryTimeout, s.checkProgress))
}

// checkProgress runs a delivery timeout after the watch was armed or last
// found progress.
func (s *session) checkProgress() {
	done := s.acks.Base() + s.acks.Done()
	if done >= s.acks.ProducedEnd() {
		s.progress.armed.Store(false)
		// A batch admitted meanwhile may have found the watch armed.
		if s.acks.Base()+s.acks.Done() >= s.acks.ProducedEnd() || !s.progress.armed.CompareAndSwap(false, true) {
			return
		}
	} else if done == s.progress.last.Load() {
		s.produceCancel(errDeliveryTimeout)
		return
	}
	s.progress.last.Store(done)
	s.progress.timer.Load().Reset(s.w.cfg.DeliveryTimeout)
}

// Causes of produceCtx ending, told apart in the failure's message.
var (
	errDeliveryTimeout = errors.New("not acknowledged within the delivery timeout")
	errCopyFailed      = errors.New("an earlier copy of the session failed")
	errSessionOver     = errors.New("the mirroring session ended")
	errInterrupted     = errors.New("the session was interrupted to re-align")
)

// sessionTick is how often a mirroring worker re-checks its desired state
// and its clients' health by itself. Both wake it when they change (the
// desired-state cache, the engine's health watch), and progress is handed
// to the checkpointer as it happens, so the tick is only a fallback: every
// session wakes at each tick, and with thousands of partitions a short one
// would be most of an idle instance's CPU.
const sessionTick = 30 * time.Second

// mirror copies records until the desired state changes, the lease ends or
// something fails. It returns after every in-flight record is settled and
// the checkpoint reflects exactly the acknowledged copies. The session runs
// under the lease's context (it settles its copies itself when asked to
// stop); what follows it, a realignment, under stepCtx, which a stop ends.
func (w *Worker) mirror(stepCtx context.Context) error {
	ctx := w.leaseCtx
	if err := w.awaitSettled(stepCtx); err != nil {
		return err
	}
	src, err := w.p.Sources.Source(ctx, w.key.Mirror)
	if err != nil {
		return retryable("source: %v", err)
	}
	if w.row.SrcNext == nil || w.row.DstNext == nil {
		return retryable("no checkpoint to mirror from")
	}
	s := &session{w: w, dest: w.dest, srcNext: *w.row.SrcNext, dstNext: *w.row.DstNext, srcEnd: -1, publishedEnd: -1,
		closing: make(chan struct{})}
	s.throttledMs.Store(w.row.ThrottledMs)
	s.fetchNext, s.produced = s.srcNext, s.dstNext
	if e := w.row.SourceEndOffset; e != nil && *e > s.srcNext {
		s.shownBacklog, s.behindSince = true, time.Now()
	}
	s.mirrored = w.cfg.Metrics.Topic(w.key.Mirror, w.key.Topic)
	s.acks = batchproduce.NewAcks(s.dstNext, w.cfg.Gate, func() { s.produceCancel(errCopyFailed) })
	s.produceCtx, s.produceCancel = context.WithCancelCause(ctx)
	defer s.produceCancel(errSessionOver)
	s.halted = make(chan struct{}, 1)
	f, err := src.Fetch(w.key.Topic, w.key.Partition, s.fetchNext,
		func(b FetchBatch) { s.deliver(ctx, b) })
	if err != nil {
		return retryable("source fetcher: %v", err)
	}
	defer f.Stop()
	interrupted, unwatch := w.p.Watch.Watch(w.key, s.dest, s.acks)
	defer unwatch()

	tick := time.NewTicker(sessionTick)
	defer tick.Stop()
	stopReason := error(nil)
	// Taken before the state is read again, as w.desiredChanged is: a
	// change that comes while the worker handles something else is seen
	// at its next wait.
	healthChanged := w.p.Copy.HealthChanged()
	for stopReason == nil && !s.stopped() {
		select {
		case <-s.halted:
		case i := <-interrupted:
			s.interrupt(i)
		case <-s.acks.Notify():
			s.mu.Lock()
			s.handleAcks()
			s.publish()
			s.mu.Unlock()
		case <-tick.C:
			s.mu.Lock()
			s.publish()
			s.mu.Unlock()
			s.reportTrouble(ctx, f)
			if d, ok := w.p.Desires.Desire(w.key.Mirror, w.key.Topic); !ok || d.State != service.DesiredMirroring {
				stopReason = errDesireChanged
			}
		case <-w.desiredChanged:
			w.desiredChanged = w.p.Desires.Changed()
			if d, ok := w.p.Desires.Desire(w.key.Mirror, w.key.Topic); !ok || d.State != service.DesiredMirroring {
				stopReason = errDesireChanged
			}
		case <-healthChanged:
			healthChanged = w.p.Copy.HealthChanged()
			s.reportTrouble(ctx, f)
		case <-w.stopping:
			stopReason = errStop
		case <-ctx.Done():
			stopReason = errStop
		}
	}
	// No batch is delivered from here on; the session is the worker's alone.
	close(s.closing)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	// Settle every in-flight record: each lands or fails within the
	// delivery timeout, which is shorter than the lease's safety margin.
	s.settle(ctx)
	// Anything still unsent (a stuck client) fails now rather than land
	// after the session, and the delivery timers stop.
	s.produceCancel(errSessionOver)
	for _, d := range s.deadlines {
		d.stop()
	}
	if t := s.progress.timer.Load(); t != nil {
		t.Stop()
	}
	// Copies in flight cannot be cancelled: the next alignment of this
	// partition waits for them.
	if s.inFlight() > 0 {
		w.p.Watch.KeepUnsettled(w.key, s.dest, s.acks, s.produced)
	}
	if s.partitionUnknown {
		// kgo fails records for a partition its metadata does not have
		// yet, without refreshing it by itself.
		w.p.Copy.RefreshProducerMetadata()
	}
	if s.topicRecreated {
		// kgo never adopts a recreated topic's new ID: it fails every
		// record with UNKNOWN_TOPIC_ID until the topic is purged from the
		// client. Purge it, so that after re-alignment (the destination
		// lost its records) the producer loads the new topic; the topic's
		// other sessions here re-align too.
		w.p.Watch.WriteOff(s.dest, "the destination topic was deleted or recreated under the producer")
	}
	s.publish()
	if i := s.interruption(); i != nil {
		return w.heal(stepCtx, *i, s)
	}
	if s.failure != nil {
		w.keepProgress(ctx, s, "failing")
		return s.failure
	}
	if !w.lease.Valid() {
		return errStop
	}
	if stopReason == errStop && s.inFlight() == 0 && len(s.pending) == 0 {
		// A clean hand-back: every copy is answered and in the checkpoint,
		// so the destination ends at dstNext as far as this mirror wrote
		// it. Saying so lets the next owner resume after one offset check
		// instead of reading records back (align.go).
		w.p.Checkpoints.Update(w.key, repo.Checkpoint{Mirror: w.key.Mirror, Topic: w.key.Topic, Partition: w.key.Partition,
			Epoch: w.lease.Epoch, SrcNext: s.srcNext, DstNext: s.dstNext, SourceEnd: -1, DestinationEnd: s.dstNext,
			ThrottledMs: s.throttledMs.Load(), HandBack: true})
	}
	if err := w.p.Checkpoints.Save(ctx, w.key); err != nil && stopReason != errStop {
		// The next session starts from the row: it must start where
		// this one's copies were answered, saved or not.
		w.syncRow(s)
		return retryable("save checkpoint: %v", err)
	}
	w.syncRow(s)
	if s.outOfRange {
		return w.realign(stepCtx, "", fmt.Sprintf("source offset %d is no longer on the source", s.fetchNext))
	}
	if stopReason == errDesireChanged {
		return nil
	}
	return stopReason
}

var errDesireChanged = fmt.Errorf("desired state changed")

// reportTrouble puts a lasting fetch or produce error in the partition's
// row (the partition stays MIRRORING), and clears it once requests succeed
// again. A produce kgo keeps retrying may still land, so the records stay
// in flight rather than failing: the partition catches up when the
// destination answers again. A producer's trouble is this partition's
// only while it has copies in flight; the fetcher's is every partition's
// it fetches.
func (s *session) reportTrouble(ctx context.Context, f Fetch) {
	w := s.w
	var fetchMsg, produceMsg string
	if since, err := f.Trouble(); err != nil {
		fetchMsg = fmt.Sprintf("fetching from the source has failed since %s (retrying): %v",
			since.UTC().Format(time.RFC3339), err)
	}
	s.mu.Lock()
	inFlight := s.inFlight()
	s.mu.Unlock()
	if since, err := w.p.Copy.ProducerTrouble(s.dest, w.key.Partition); err != nil && inFlight > 0 {
		produceMsg = fmt.Sprintf("producing to the destination has failed since %s (retrying): %v",
			since.UTC().Format(time.RFC3339), err)
	}
	msg := fetchMsg
	if produceMsg != "" {
		msg = strings.TrimPrefix(msg+"; "+produceMsg, "; ")
	}
	if msg == s.reported {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := w.p.Rows.RecordPartitionError(wctx, w.fence(), service.StateMirroring, msg); err != nil {
		w.log.Warn("recording the partition's fetch or produce trouble failed", "err", err)
		return
	}
	// Each side is logged as what it is: a destination that does not
	// answer is no source trouble.
	was := s.reportedSides
	if fetchMsg != "" && !was.fetch {
		w.log.Warn("source fetches keep failing; still MIRRORING", "err", fetchMsg)
	} else if fetchMsg == "" && was.fetch {
		w.log.Info("source fetches succeed again")
	}
	if produceMsg != "" && !was.produce {
		w.log.Warn("produces to the destination keep failing; still MIRRORING", "err", produceMsg)
	} else if produceMsg == "" && was.produce {
		w.log.Info("produces to the destination succeed again")
	}
	s.reported = msg
	s.reportedSides = troubleSides{fetch: fetchMsg != "", produce: produceMsg != ""}
}

// troubleSides says which side's trouble a session last reported.
type troubleSides struct{ fetch, produce bool }

// keepProgress saves the session's verified progress before a FAILED write
// or a realignment: the write returns the stored row, so a checkpoint left
// to the batch saver would be forgotten and alignment would start from an
// older one.
func (w *Worker) keepProgress(ctx context.Context, s *session, before string) {
	if w.lease.Valid() {
		if err := w.p.Checkpoints.Save(ctx, w.key); err != nil {
			w.log.Warn("saving the checkpoint before "+before, "err", err)
		}
	}
	w.syncRow(s)
}

// syncRow makes the worker's row carry the session's checkpoint, so the next
// state write starts from it.
func (w *Worker) syncRow(s *session) {
	src, dst := s.srcNext, s.dstNext
	w.row.SrcNext, w.row.DstNext = &src, &dst
}

// deliver copies one fetched batch, in the fetch goroutine, once the
// mirror's throttle lets its bytes through. The wait holds up the fetch
// goroutine, and with it the fetches of the mirror's partitions that
// share it: the throttle paces what is read, not only what is written.
func (s *session) deliver(ctx context.Context, b FetchBatch) {
	waited, err := s.throttle(ctx, b)
	if waited > 0 {
		s.w.cfg.Metrics.Throttled(s.w.key.Mirror, s.w.key.Topic, waited)
	}
	if err != nil {
		return // the session or the lease ended
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting = nil // copied below, or never
	if s.closed || s.failure != nil || s.outOfRange || s.interrupted != nil {
		return
	}
	s.handleBatch(ctx, b)
	s.publish()
	if s.failure != nil || s.outOfRange {
		select {
		case s.halted <- struct{}{}:
		default:
		}
	}
}

// throttleReportEvery is how often a copy that waits for the throttle adds
// its wait so far to the partition's throttled time and hands it to the
// checkpointer: a partition held for long must show its throttled_ms
// rising, not frozen with its destination offset as if it were stuck.
const throttleReportEvery = time.Second

// throttle waits for the mirror's throttle to let b through, counting the
// wait into the partition's throttled time as it goes.
func (s *session) throttle(ctx context.Context, b FetchBatch) (time.Duration, error) {
	var (
		mu      sync.Mutex
		counted time.Duration // of this wait, already in throttledMs
		over    bool
	)
	start := time.Now()
	var tick *time.Timer
	tick = time.AfterFunc(throttleReportEvery, func() {
		mu.Lock()
		defer mu.Unlock()
		if over {
			return
		}
		d := time.Since(start)
		s.throttledMs.Add((d - counted).Milliseconds())
		counted = d.Truncate(time.Millisecond)
		s.mu.Lock()
		if !s.closed {
			if s.waiting == nil {
				s.noteWaiting(b)
			}
			s.publishThrottled()
		}
		s.mu.Unlock()
		tick.Reset(throttleReportEvery)
	})
	waited, err := s.w.p.Copy.Throttle(ctx, s.closing, s.w.key, b.size)
	tick.Stop()
	mu.Lock()
	over = true
	if rest := waited - counted; rest > 0 {
		s.throttledMs.Add(rest.Milliseconds())
	}
	mu.Unlock()
	return waited, err
}

// stopped reports whether a failure, a gap in the source or an
// interruption ends the session.
func (s *session) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure != nil || s.outOfRange || s.interrupted != nil
}

// interruption is why the session was interrupted, or nil; a produce
// failure that says the destination topic is gone or was recreated under
// the producer, or that it lost the producer's sequence, is one too:
// re-aligning repairs it, so it is no failure.
func (s *session) interruption() *Interruption {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.interrupted == nil && s.topicRecreated {
		return &Interruption{Msg: "the destination topic was deleted or recreated under the producer"}
	}
	if s.interrupted == nil && s.sequenceLost {
		return &Interruption{Msg: "the destination no longer knows the producer's sequence (rebuilt, or its producer state expired)"}
	}
	return s.interrupted
}

// interrupt ends the session, in the worker's loop, for what the
// destination watch found outside it: no more record is sent, and the
// worker re-aligns once the copies in flight are answered or written off.
// The first reason is kept.
func (s *session) interrupt(i Interruption) {
	s.mu.Lock()
	if s.interrupted == nil {
		s.interrupted = &i
	}
	s.mu.Unlock()
	s.produceCancel(errInterrupted)
}

func (s *session) handleBatch(ctx context.Context, b FetchBatch) {
	w := s.w
	if errors.Is(b.Err, kerr.OffsetOutOfRange) {
		s.outOfRange = true
		return
	}
	var trunc *batchfetch.TruncatedError
	if errors.As(b.Err, &trunc) {
		// Records copied from the divergence on are not the source's:
		// an operator decides (restart with recreate to copy the source
		// as it is now).
		s.failure = permanent("%v; nothing past offset %d is copied", trunc, trunc.Position)
		return
	}
	var bad *batchfetch.BadBatchError
	if errors.As(b.Err, &bad) {
		// A source whose answer is not a log Kafka would serve: the
		// partition fails rather than copy it, or fetch it again and
		// again; the retry's backoff spaces the next look.
		s.failure = retryable("%v; nothing from offset %d on is copied", bad, bad.Offset)
		return
	}
	if b.Err != nil {
		s.failure = retryable("fetch from source: %v", b.Err)
		return
	}
	if b.LSO >= 0 {
		s.srcEnd = b.LSO
	}
	// The lease is checked once a batch: its records are queued at once,
	// and none is sent after the lease's deadline, when produceCtx ends.
	if !w.lease.Valid() {
		s.failure = errStop
		return
	}
	s.copyBatches(b)
}

// admit takes produce room for n more copies and returns their delivery
// deadline, which their batch's first send arms (sentBatch); nil (with the
// session's failure set) when produceCtx ended first. Room for a whole batch comes first: once one record of it is
// handed to the producer, every later one must follow, or the destination
// could skip one (batchproduce.Gate). If produceCtx ends meanwhile, none is.
func (s *session) admit(n int64) *batchDeadline {
	w := s.w
	upTo := s.produced + n
	if err := w.cfg.Gate.Acquire(s.produceCtx, n); err != nil {
		s.failure = retryable("produce to destination offset %d (source offset %d): %v", s.produced, s.fetchNext, err)
		return nil
	}
	s.acks.SetProducedEnd(upTo)
	s.watchProgress()
	d := &batchDeadline{upTo: upTo}
	s.deadlines = append(s.deadlines, d)
	return d
}

// inFlight is how many produced records have no result yet.
func (s *session) inFlight() int64 {
	return s.produced - s.acks.Base() - s.acks.Done()
}

// handleAcks advances the checkpoint over the copies verified since the
// last call, and turns the first failed or misplaced one into the
// session's failure.
func (s *session) handleAcks() {
	done, verified, failure := s.acks.Take()
	taken := s.taken
	for s.taken < verified && len(s.pending) > 0 {
		s.passControls()
		head := &s.pending[0]
		k := min(head.n, verified-s.taken)
		s.extendRun(head.src, head.dst, k)
		s.srcNext, s.dstNext = head.src+k, head.dst+k
		head.src, head.dst, head.n = head.src+k, head.dst+k, head.n-k
		s.taken += k
		if head.n == 0 {
			s.pending = s.pending[1:]
		}
	}
	// Counted per acknowledged run, not per record. The promise publishes
	// verifiedBytes with verified at each batch's result (batchproduce.Acks),
	// storing the bytes first, so a take between the two stores sees the
	// bytes of a batch whose records come with the next; the totals stay
	// exact.
	if n, b := s.taken-taken, s.acks.VerifiedBytes(); n > 0 || b != s.countedBytes {
		s.mirrored.Add(n, b-s.countedBytes)
		s.countedBytes = b
	}
	if failure != nil && s.failure == nil {
		s.passControls()
		p := pendingRun{src: -1, dst: s.acks.Base() + failure.Index}
		if len(s.pending) > 0 {
			p = s.pending[0]
		}
		switch err := failure.Err; {
		case errors.Is(err, context.Canceled) && context.Cause(s.produceCtx) != nil:
			// The session's context ended: say why, not "context canceled".
			s.failure = retryable("produce to destination offset %d (source offset %d): %v", p.dst, p.src, context.Cause(s.produceCtx))
		case err != nil:
			s.topicRecreated = s.topicRecreated || errors.Is(err, kerr.UnknownTopicID) ||
				errors.Is(err, kerr.UnknownTopicOrPartition)
			s.sequenceLost = s.sequenceLost || errors.Is(err, kerr.OutOfOrderSequenceNumber) ||
				errors.Is(err, kerr.UnknownProducerID) || errors.Is(err, kerr.InvalidProducerEpoch)
			s.partitionUnknown = s.partitionUnknown || strings.Contains(err.Error(), "invalid record partitioning choice")
			s.failure = retryable("produce to destination offset %d (source offset %d): %v", p.dst, p.src, err)
		default:
			s.failure = retryable("foreign write detected on %s/%d: source offset %d landed at destination offset %d, expected %d; re-aligning",
				s.dest, s.w.key.Partition, p.src, failure.Got, p.dst)
		}
	}
	if s.failure == nil {
		s.passControls()
	}
	settled := s.acks.Base() + done
	for len(s.deadlines) > 0 && s.deadlines[0].upTo <= settled {
		s.deadlines[0].stop()
		s.deadlines = s.deadlines[1:]
	}
}

// passControls moves the checkpoint past the transaction markers at the
// head of the queue: every record before them is acknowledged.
func (s *session) passControls() {
	for len(s.pending) > 0 && s.pending[0].control {
		if s.failure == nil {
			s.srcNext = s.pending[0].src + s.pending[0].n
		}
		s.pending = s.pending[1:]
	}
}

// extendRun adds n verified copies from (src, dst) to the offset map.
func (s *session) extendRun(src, dst, n int64) {
	if r := s.run; r != nil && r.SrcStart+r.Count == src && r.DstStart+r.Count == dst {
		r.Count += n
	} else {
		s.run = &repo.OffsetRun{SrcStart: src, DstStart: dst, Count: n}
	}
	if n := len(s.changed); n > 0 && s.changed[n-1].SrcStart == s.run.SrcStart {
		s.changed[n-1] = *s.run
	} else {
		s.changed = append(s.changed, *s.run)
	}
}

// stopSettleMax bounds a session's wait for its copies when the instance
// shuts down: a live destination answers within milliseconds, and copies
// unanswered by then keep their lease held until its session expires.
const stopSettleMax = time.Second

// settle waits until every produced record is acknowledged or failed.
func (s *session) settle(ctx context.Context) {
	// Within what is left of a shutdown, too: copies still unanswered then
	// keep the lease from being released (the engine's unsettled.go).
	deadline := time.NewTimer(s.w.cfg.StopBudget.Bound(s.w.cfg.DeliveryTimeout+2*time.Second, stopSettleMax))
	defer deadline.Stop()
	for {
		last := s.inFlight() == 0
		s.handleAcks()
		if last {
			return
		}
		select {
		case <-s.acks.Notify():
		case <-deadline.C:
			// kgo fails records at the delivery timeout; getting here means
			// the client is stuck, and unacknowledged records are not counted.
			if s.failure == nil {
				s.failure = retryable("%d record(s) unacknowledged after the delivery timeout", s.inFlight())
			}
			return
		}
	}
}

// publish hands verified progress to the checkpointer.
func (s *session) publish() {
	w := s.w
	// Only what changed: every poll reports each partition's end, and
	// republishing an unchanged one would make every partition's row a
	// write each second (5,000 rows a second at 5,000 partitions).
	oldest := s.oldest()
	if len(s.changed) == 0 && (s.srcEnd < 0 || s.srcEnd == s.publishedEnd) && (oldest == nil || s.publishedOldest) {
		return
	}
	s.publishedEnd, s.publishedOldest = s.srcEnd, oldest != nil
	// Verified progress ends a run of failures: backoff starts over.
	reset := len(s.changed) > 0 && w.row.RetryAttempt > 0
	w.p.Checkpoints.Update(w.key, repo.Checkpoint{Mirror: w.key.Mirror, Topic: w.key.Topic, Partition: w.key.Partition,
		Epoch: w.lease.Epoch, SrcNext: s.srcNext, DstNext: s.dstNext, SourceEnd: s.srcEnd,
		DestinationEnd: s.dstNext, Runs: s.changed, ResetRetries: reset, ThrottledMs: s.throttledMs.Load(),
		Oldest: oldest})
	if reset {
		w.row.RetryAttempt = 0
	}
	s.changed = nil
	s.noteCatchUp()
}

// publishThrottled hands the partition's throttled time to the
// checkpointer with its verified progress as it stands; s.mu is held.
func (s *session) publishThrottled() {
	w := s.w
	w.p.Checkpoints.Update(w.key, repo.Checkpoint{Mirror: w.key.Mirror, Topic: w.key.Topic, Partition: w.key.Partition,
		Epoch: w.lease.Epoch, SrcNext: s.srcNext, DstNext: s.dstNext, SourceEnd: s.srcEnd,
		DestinationEnd: s.dstNext, Runs: s.changed, ThrottledMs: s.throttledMs.Load(), Oldest: s.oldest()})
	s.changed = nil
}

// catchUpAfter is how long a partition must have been behind for its catch-up
// to be saved ahead of the checkpoint interval. Records that trickle in are
// acknowledged within milliseconds and never ask; a backlog does, once.
const catchUpAfter = 200 * time.Millisecond

// noteCatchUp tells the checkpointer when a backlog has just been copied.
func (s *session) noteCatchUp() {
	caughtUp := s.srcEnd >= 0 && s.srcNext >= s.srcEnd && s.inFlight() == 0
	switch {
	case !caughtUp && s.behindSince.IsZero():
		s.behindSince = time.Now()
	case caughtUp && !s.behindSince.IsZero():
		if s.shownBacklog || time.Since(s.behindSince) >= catchUpAfter {
			s.w.p.Checkpoints.CaughtUp()
		}
		s.behindSince, s.shownBacklog = time.Time{}, false
	}
}

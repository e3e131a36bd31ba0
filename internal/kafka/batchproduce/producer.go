// Package batchproduce produces whole record batches, built elsewhere, as
// one idempotent producer: kgo's producer takes records and builds its own
// batches, so a copier that keeps the source's batches sends raw produce
// requests instead. The producer owns what the broker checks: the producer
// id and epoch, and each partition's sequence.
//
// A partition has at most one request in flight, so its batches reach the
// broker in order without relying on the order of concurrent requests on a
// connection. A request carries the next batch of every partition led by
// its broker, and several requests to a broker may be in flight.
//
// Beside the producer are what keeps its results in order and its buffer
// bounded for the data plane: the Gate that bounds the records in flight
// across every partition (the engine owns the one Gate), and Acks, one
// mirroring session's count of its results, which the engine reads for
// copies still in flight.
package batchproduce

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/leaders"
)

// Payload is one batch to produce (a *recordbatch.Batch is one).
// Produced returns its bytes as produced by pid at epoch, starting at
// sequence seq; the producer calls it once, and may send the bytes until
// the batch is answered, so it can rewrite the payload's own bytes rather
// than copy them. Records is its record count, by which the partition's
// sequence advances.
type Payload interface {
	Produced(pid int64, epoch int16, seq int32) []byte
	Records() int32
}

// FirstSender is a Payload that is told when its batch is first sent
// (FirstSent, called once, with the producer's lock held: it must not
// block or call the producer). A batch not sent yet is never sent once its
// context has ended, so a copier bounds only what is in flight: its
// delivery deadline runs from then, not from the moment it queued the
// batch behind others.
type FirstSender interface {
	FirstSent()
}

// Result is a batch's outcome: the destination offset of its first record,
// or why it was not written. A batch that failed was not written; the
// batches queued after it on its partition fail too, with ErrEarlierFailed.
type Result struct {
	BaseOffset int64
	Err        error
}

// ErrEarlierFailed fails the batches queued behind a failed one: producing
// them would leave a hole in the partition.
var ErrEarlierFailed = errors.New("an earlier batch of the partition failed")

// ErrClosed fails what is queued when the producer closes.
var ErrClosed = errors.New("batch producer closed")

// Config wires a Producer.
type Config struct {
	// Client reaches the destination: its metadata and its brokers'
	// produce connections, on which kgo sends the producer's kmsg
	// requests (dialing, TLS, SASL, versions and throttles are kgo's). It
	// must not produce records itself.
	Client *kgo.Client
	Logger *slog.Logger
	// RequestTimeout is the broker's timeout of a produce request (how
	// long it may wait for its replicas); default 10s. The producer itself
	// waits for the answer as long as the connection lives, as kgo's does:
	// a batch reported failed while its request could still be appended
	// would land behind the copier's back.
	RequestTimeout time.Duration
	// MaxRequestBytes bounds the batches of one request; default 4 MiB.
	// A batch larger than it goes alone.
	MaxRequestBytes int
	// RetryBackoff spaces the retries of a partition whose leader moved or
	// whose broker did not answer; default 100ms. It doubles with each
	// retry of a run, up to MaxRetryBackoff (default 1s: a batch is
	// retried a few times within a delivery timeout), and starts over at
	// the partition's next answer.
	RetryBackoff, MaxRetryBackoff time.Duration
}

// Producer produces Payloads as one idempotent producer.
type Producer struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	pid   int64
	epoch int16
	// bump: a partition's sequence broke (the broker refused one); the
	// next send first takes a new epoch, which starts every partition's
	// sequence at 0.
	bump  bool
	parts map[topicPartition]*partition
	// queued are the partitions with a batch queued or in flight, the
	// only ones a dispatch looks at: with thousands of partitions under a
	// trickle, a walk over all of them at each wake-up would cost more than
	// the copies.
	queued map[topicPartition]*partition
	meta   *leaders.Cache
	closed bool

	// answers are the promises to call, in the order their results were
	// decided under mu; one goroutine calls them (answer), so a partition's
	// promises run one at a time and in its order even when two
	// goroutines decide results one after the other.
	answers    []func()
	answerWake chan struct{}
	// answersDone: closed, and nothing in flight; answer returns once
	// the queue is empty.
	answersDone bool
	answered    chan struct{} // closed when answer returns

	// dispatchFailures counts dispatches in a row that failed before any
	// partition's turn (dispatchFailed).
	dispatchFailures atomic.Int32

	wake     chan struct{}
	done     chan struct{}
	inFlight sync.WaitGroup
	// ctx is the requests', ended by Close.
	ctx    context.Context
	cancel context.CancelFunc
}

type topicPartition = leaders.TopicPartition

type partition struct {
	tp    topicPartition
	seq   int32      // the next batch's sequence
	queue []*pending // not yet sent, oldest first
	// sending is the batch in flight, nil when none.
	sending *pending
	// retryAt holds a batch back after a retriable error.
	retryAt time.Time
	// retries counts the partition's retries since its last answer,
	// retrySince is when the first of them was decided and retryErr why
	// the latest was (Retrying).
	retries    int
	retrySince time.Time
	retryErr   error
}

type pending struct {
	ctx     context.Context
	payload Payload
	promise func(Result)
	// raw is the batch as first sent, kept so that a retry sends the same
	// bytes under the same sequence and epoch; seq is its first sequence.
	raw   []byte
	seq   int32
	epoch int16
	// maybeWritten: a send went unanswered, so the batch may be in the
	// log; it is sent again until an answer says where.
	maybeWritten bool
}

// New returns a started Producer.
func New(cfg Config) (*Producer, error) {
	if cfg.Client == nil {
		return nil, errors.New("batchproduce: Client is required")
	}
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, 10*time.Second)
	cfg.MaxRequestBytes = cmp.Or(cfg.MaxRequestBytes, 4<<20)
	cfg.RetryBackoff = cmp.Or(cfg.RetryBackoff, 100*time.Millisecond)
	cfg.MaxRetryBackoff = max(cmp.Or(cfg.MaxRetryBackoff, time.Second), cfg.RetryBackoff)
	p := &Producer{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), pid: -1, parts: map[topicPartition]*partition{},
		queued: map[topicPartition]*partition{},
		meta:   leaders.New(cfg.Client), wake: make(chan struct{}, 1), done: make(chan struct{}),
		answerWake: make(chan struct{}, 1), answered: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.run()
	go p.answer()
	return p, nil
}

// answerLocked queues promise calls behind those decided before.
func (p *Producer) answerLocked(calls ...func()) {
	p.answers = append(p.answers, calls...)
	select {
	case p.answerWake <- struct{}{}:
	default:
	}
}

// answer calls the queued promises in order until the producer closes and
// they are all called.
func (p *Producer) answer() {
	defer close(p.answered)
	for {
		p.mu.Lock()
		calls := p.answers
		p.answers = nil
		done := p.answersDone
		p.mu.Unlock()
		for _, c := range calls {
			c()
		}
		switch {
		case len(calls) > 0:
			continue // more may have come meanwhile
		case done:
			return
		}
		<-p.answerWake
	}
}

// Produce queues a batch for a partition; promise is called once with its
// result, in the partition's order. A batch whose ctx has ended by the time
// it would be sent fails with the context's error, and so does every batch
// queued after it. Once sent, a batch is answered by the broker or fails
// with the request's error.
func (p *Producer) Produce(ctx context.Context, topic string, part int32, payload Payload, promise func(Result)) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		promise(Result{Err: ErrClosed})
		return
	}
	tp := topicPartition{Topic: topic, Partition: part}
	st := p.parts[tp]
	if st == nil {
		st = &partition{tp: tp}
		p.parts[tp] = st
	}
	st.queue = append(st.queue, &pending{ctx: ctx, payload: payload, promise: promise})
	p.queued[tp] = st
	p.mu.Unlock()
	p.signal()
}

// Forget fails every batch of the topic not sent yet with err, and starts
// a new epoch before the next batch: the topic was deleted or recreated
// under the producer, or its copies were written off, so the broker's
// sequences for it no longer follow this producer's.
func (p *Producer) Forget(topic string, err error) {
	p.mu.Lock()
	for tp, st := range p.parts {
		if tp.Topic == topic {
			p.answerLocked(p.failQueueLocked(st, err))
		}
	}
	p.bump = true
	p.mu.Unlock()
	p.meta.Stale()
	p.signal()
}

// RefreshMetadata makes the next send read the partition leaders again.
func (p *Producer) RefreshMetadata() {
	p.meta.Stale()
	p.signal()
}

// Close fails what is queued with ErrClosed and waits for the requests in
// flight.
func (p *Producer) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.answered
		return
	}
	p.closed = true
	for _, st := range p.parts {
		p.answerLocked(p.failQueueLocked(st, ErrClosed))
	}
	p.mu.Unlock()
	close(p.done)
	p.cancel()
	p.inFlight.Wait()
	// Every result is decided: the answers end once they are called.
	p.mu.Lock()
	p.answersDone = true
	p.answerLocked()
	p.mu.Unlock()
	<-p.answered
}
func (p *Producer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run sends what is ready whenever something changes, and at the earliest
// retry time.
func (p *Producer) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := p.dispatch()
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), time.Millisecond))
		}
		select {
		case <-p.done:
			return
		case <-p.wake:
		case <-timer.C:
		}
	}
}

// dispatch sends the next batch of every partition that has none in
// flight, grouped by leader, and returns when a held-back batch is due.
func (p *Producer) dispatch() (next time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.RequestTimeout)
	defer cancel()
	if err := p.ensureProducerID(ctx); err != nil {
		p.log.Warn("batch producer: no producer id yet; retrying", "err", err)
		return time.Now().Add(p.dispatchFailed())
	}
	p.mu.Lock()
	var ready []*partition
	now := time.Now()
	topics := map[string]bool{}
	for tp, st := range p.queued {
		if st.sending == nil && len(st.queue) == 0 {
			delete(p.queued, tp) // settled; Produce queues it again
			continue
		}
		if st.sending != nil {
			continue
		}
		if now.Before(st.retryAt) {
			if next.IsZero() || st.retryAt.Before(next) {
				next = st.retryAt
			}
			continue
		}
		// A batch whose context ended is never sent, nor anything after it.
		if head := st.queue[0]; head.ctx.Err() != nil && !head.maybeWritten {
			p.failEndedLocked(st, head)
			continue
		}
		ready = append(ready, st)
		topics[st.tp.Topic] = true
	}
	p.mu.Unlock()
	if len(ready) == 0 {
		return next
	}
	leaderOf, err := p.meta.Leaders(ctx, topics)
	if err != nil {
		p.log.Warn("batch producer: destination metadata; retrying", "err", err)
		return time.Now().Add(p.dispatchFailed())
	}
	p.dispatchFailures.Store(0)
	byBroker := map[int32][]*partition{}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return time.Time{}
	}
	for _, st := range ready {
		if st.sending != nil || len(st.queue) == 0 {
			continue // Close emptied it meanwhile
		}
		// Checked again right before sending: reading the leaders may have
		// taken a while, and a batch is never sent once its context (the
		// copier's lease) has ended, unless an earlier send of it may have
		// landed (see send).
		if head := st.queue[0]; head.ctx.Err() != nil && !head.maybeWritten {
			p.failEndedLocked(st, head)
			continue
		}
		l, ok := leaderOf[st.tp]
		if !ok {
			p.noteRetryLocked(st, ErrNoLeader)
			st.retryAt = now.Add(p.backoffLocked(st))
			if next.IsZero() || st.retryAt.Before(next) {
				next = st.retryAt
			}
			p.meta.Stale()
			continue
		}
		byBroker[l.Broker] = append(byBroker[l.Broker], st)
	}
	for broker, parts := range byBroker {
		var sent []*partition
		size := 0
		for _, st := range parts {
			head := st.queue[0]
			if head.raw == nil {
				head.raw, head.seq, head.epoch = head.payload.Produced(p.pid, p.epoch, st.seq), st.seq, p.epoch
				st.seq += head.payload.Records()
				if fs, ok := head.payload.(FirstSender); ok {
					fs.FirstSent()
				}
			}
			if size > 0 && size+len(head.raw) > p.cfg.MaxRequestBytes {
				p.signal() // the rest go in the next request
				break
			}
			size += len(head.raw)
			st.queue = st.queue[1:]
			st.sending = head
			sent = append(sent, st)
		}
		p.inFlight.Add(1)
		go p.send(broker, p.request(sent, leaderOf), sent)
	}
	p.mu.Unlock()
	return next
}

// request is one produce request of the batches the partitions send.
func (p *Producer) request(sent []*partition, leaderOf map[topicPartition]leaders.Leader) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	// Acks all, as sent: kgo rewrites the acks only of a bare
	// *kmsg.ProduceRequest, and send wraps it (presized).
	req.Acks, req.TimeoutMillis = -1, int32(p.cfg.RequestTimeout.Milliseconds())
	index := map[string]int{}
	for _, st := range sent {
		i, ok := index[st.tp.Topic]
		if !ok {
			t := kmsg.NewProduceRequestTopic()
			t.Topic, t.TopicID = st.tp.Topic, leaderOf[st.tp].TopicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			index[st.tp.Topic] = i
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = st.tp.Partition, st.sending.raw
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// send issues one request on kgo's produce connection to the broker and
// settles each of its partitions' batches. kgo waits for the answer as
// long as the connection lives (the broker's timeout plus its overhead),
// and a throttled answer holds the connection's next request back.
func (p *Producer) send(broker int32, req *kmsg.ProduceRequest, sent []*partition) {
	defer p.inFlight.Done()
	defer p.signal()
	resp, err := p.cfg.Client.Broker(int(broker)).Request(p.ctx, presized{req})
	codes := map[topicPartition]kmsg.ProduceResponseTopicPartition{}
	if err == nil {
		// From v13 the response names topics by id only.
		names := map[[16]byte]string{}
		for _, t := range req.Topics {
			names[t.TopicID] = t.Topic
		}
		for _, t := range resp.(*kmsg.ProduceResponse).Topics {
			topic := t.Topic
			if topic == "" {
				topic = names[t.TopicID]
			}
			for _, rp := range t.Partitions {
				codes[topicPartition{Topic: topic, Partition: rp.Partition}] = rp
			}
		}
	}
	p.mu.Lock()
	for _, st := range sent {
		head := st.sending
		st.sending = nil
		rp, answered := codes[st.tp]
		code := kerr.ErrorForCode(rp.ErrorCode)
		switch {
		case err != nil || !answered:
			// No answer: the batch may have landed. Like a copy in flight
			// it cannot be cancelled, so it is sent again with the same
			// bytes and sequence, which the broker deduplicates, until the
			// broker answers, even after its context ended: its copier
			// waits for the answer before the partition is written again
			// (or writes it off: Forget).
			head.maybeWritten = true
			cause := err
			if cause == nil {
				cause = ErrNotAnswered
			}
			p.retryLocked(st, head, cause)
		case code == nil, errors.Is(code, kerr.DuplicateSequenceNumber):
			st.retries, st.retrySince, st.retryErr = 0, time.Time{}, nil
			p.answerLocked(func() { head.answer(Result{BaseOffset: rp.BaseOffset}) })
		case retriable(code):
			// Not written: sent again, unless its context ends first
			// (dispatch then fails it).
			p.retryLocked(st, head, code)
		default:
			st.retries, st.retrySince, st.retryErr = 0, time.Time{}, nil
			// Not written: the partition's next batch takes its sequence,
			// or, if the broker lost this producer's sequence, a new epoch
			// starts it again.
			if head.epoch == p.epoch {
				st.seq = head.seq
			}
			if brokenSequence(code) {
				p.bump = true
			}
			cause := fmt.Errorf("produce to %s/%d: %w", st.tp.Topic, st.tp.Partition, code)
			p.answerLocked(func() { head.answer(Result{Err: cause}) }, p.failQueueLocked(st, ErrEarlierFailed))
		}
	}
	if err != nil || len(codes) < len(sent) {
		p.meta.Stale()
	}
	p.mu.Unlock()
}

// retryLocked puts a batch back at the head of its partition's queue, to be
// sent again after the backoff with the same bytes.
func (p *Producer) retryLocked(st *partition, head *pending, cause error) {
	st.queue = append([]*pending{head}, st.queue...)
	p.noteRetryLocked(st, cause)
	st.retryAt = time.Now().Add(p.backoffLocked(st))
	p.meta.Stale()
}

// dispatchFailed counts a dispatch that could not take a producer id or
// read the leaders, and returns the wait before the next: RetryBackoff
// doubled for each failure before it in a row, at most MaxRetryBackoff.
func (p *Producer) dispatchFailed() time.Duration {
	n := p.dispatchFailures.Add(1)
	d := p.cfg.RetryBackoff
	for i := int32(1); i < n && d < p.cfg.MaxRetryBackoff; i++ {
		d *= 2
	}
	return min(d, p.cfg.MaxRetryBackoff)
}

// Why a partition's batch waits to be sent again (Retrying), when no
// broker said.
var (
	ErrNoLeader    = errors.New("no leader known for the partition")
	ErrNotAnswered = errors.New("the broker's answer left the partition out")
)

func (p *Producer) noteRetryLocked(st *partition, cause error) {
	if st.retries == 0 {
		st.retrySince = time.Now()
	}
	st.retries++
	st.retryErr = cause
}

// backoffLocked is the wait before a partition's next retry: RetryBackoff
// doubled for each retry of the run before this one, at most
// MaxRetryBackoff.
func (p *Producer) backoffLocked(st *partition) time.Duration {
	d := p.cfg.RetryBackoff
	for i := 1; i < st.retries && d < p.cfg.MaxRetryBackoff; i++ {
		d *= 2
	}
	return min(d, p.cfg.MaxRetryBackoff)
}

// RetryingPartitions are the partitions whose batches have been retried
// without an answer for at least d, and since when.
func (p *Producer) RetryingPartitions(d time.Duration) map[leaders.TopicPartition]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out map[leaders.TopicPartition]time.Time
	for tp, st := range p.queued {
		if st.retries > 0 && time.Since(st.retrySince) >= d {
			if out == nil {
				out = map[leaders.TopicPartition]time.Time{}
			}
			out[tp] = st.retrySince
		}
	}
	return out
}

// Retrying says since when, and why, a partition's batches have been
// retried without an answer (a zero time and nil when they are not): the
// broker answered with an error it retries, left the partition out, did
// not answer at all, or no leader is known. A copier shows it while its
// copies wait.
func (p *Producer) Retrying(topic string, part int32) (since time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.parts[topicPartition{Topic: topic, Partition: part}]
	if st == nil || st.retries == 0 || st.sending == nil && len(st.queue) == 0 {
		return time.Time{}, nil
	}
	return st.retrySince, st.retryErr
}

// answer calls the batch's promise and lets its bytes go: no request
// holds them once it is answered.
func (q *pending) answer(r Result) {
	q.promise(r)
	q.raw = nil
}

// failEndedLocked fails a partition's queue from head, whose context ended
// before it could be (sent or) sent again, certainly not written: the
// partition's next batch takes its sequence.
func (p *Producer) failEndedLocked(st *partition, head *pending) {
	if head.raw != nil && head.epoch == p.epoch {
		st.seq = head.seq
	}
	p.answerLocked(p.failQueueLocked(st, context.Cause(head.ctx)))
}

// failQueueLocked empties a partition's queue (batches not sent yet) and
// returns the call that fails each with err, for answerLocked.
func (p *Producer) failQueueLocked(st *partition, err error) func() {
	queued := st.queue
	st.queue = nil
	return func() {
		for _, q := range queued {
			q.answer(Result{Err: err})
		}
	}
}

// ensureProducerID takes the producer id, or a new epoch after a broken
// sequence (KIP-360), with which every partition's sequence starts at 0.
func (p *Producer) ensureProducerID(ctx context.Context) error {
	p.mu.Lock()
	need := p.pid < 0 || p.bump
	pid, epoch := p.pid, p.epoch
	p.mu.Unlock()
	if !need {
		return nil
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60_000
	if pid >= 0 {
		req.ProducerID, req.ProducerEpoch = pid, epoch
	}
	resp, err := req.RequestWith(ctx, p.cfg.Client)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pid, p.epoch, p.bump = resp.ProducerID, resp.ProducerEpoch, false
	// A batch in flight or held for a retry goes out as it was built,
	// under the old epoch; each partition's next batch starts the new one.
	for _, st := range p.parts {
		st.seq = 0
	}
	return nil
}

// retriable errors leave the batch unwritten and the producer's state as
// it was: the batch is sent again, to the partition's leader as the
// refreshed metadata says. kerr decides, as kgo's own producer asks it,
// with kgo's exceptions: CORRUPT_MESSAGE would refuse the same bytes again,
// and a broken sequence is never retried as it is. An unknown topic is not
// waited out either (kgo gives up after a few tries): a destination topic
// that vanished is the copier's to report and heal.
func retriable(err error) bool {
	return kerr.IsRetriable(err) && !errors.Is(err, kerr.CorruptMessage) && !brokenSequence(err) &&
		!errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.UnknownTopicID)
}

// brokenSequence errors mean the broker no longer follows this producer's
// sequence for the partition: a new epoch starts it again.
func brokenSequence(err error) bool {
	return errors.Is(err, kerr.OutOfOrderSequenceNumber) || errors.Is(err, kerr.UnknownProducerID) ||
		errors.Is(err, kerr.InvalidProducerEpoch)
}

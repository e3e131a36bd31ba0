package batchfetch

import (
	"cmp"
	"errors"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/runtime/leaders"
	"kmirror/internal/runtime/recordbatch"
)

// brokerLoop fetches the partitions one broker leads, in one fetch session.
type brokerLoop struct {
	f  *Fetcher
	id int32
	// assigned are the partitions this loop fetches, with their leader;
	// guarded by f.mu.
	assigned map[leaders.TopicPartition]leaders.Leader
	wake     chan struct{}

	// The session, the loop's own: its id and next epoch (id 0: none),
	// and the position it holds for each partition.
	sessionID, sessionEpoch int32
	inSession               map[leaders.TopicPartition]sessionEntry
}

// sessionEntry is what the broker's session holds for a partition: its
// position, and its topic's id (to forget it by).
type sessionEntry struct {
	offset  int64
	topicID [16]byte
}

func newBrokerLoop(f *Fetcher, id int32) *brokerLoop {
	return &brokerLoop{f: f, id: id, assigned: map[leaders.TopicPartition]leaders.Leader{},
		wake: make(chan struct{}, 1), inSession: map[leaders.TopicPartition]sessionEntry{}}
}

// add and drop change what the loop fetches; f.mu is held.
func (b *brokerLoop) add(tp leaders.TopicPartition, l leaders.Leader) {
	b.assigned[tp] = l
	b.signal()
}

func (b *brokerLoop) drop(tp leaders.TopicPartition) {
	delete(b.assigned, tp)
	b.signal()
}

func (b *brokerLoop) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// requested is a partition as a request asked for it.
type requested struct {
	p      *partition
	offset int64
}

func (b *brokerLoop) run() {
	f := b.f
	defer f.wg.Done()
	for f.ctx.Err() == nil {
		req, asked := b.request()
		if req == nil {
			select {
			case <-f.ctx.Done():
			case <-b.wake:
			}
			continue
		}
		resp, err := f.cfg.Client.Broker(int(b.id)).Request(f.ctx, req)
		if err == nil {
			err = kerr.ErrorForCode(resp.(*kmsg.FetchResponse).ErrorCode)
		}
		if err != nil {
			if f.ctx.Err() != nil {
				return
			}
			// A session the broker no longer knows, or any failed
			// request: the next request starts a new session, with every
			// partition in it.
			if !errors.Is(err, kerr.FetchSessionIDNotFound) && !errors.Is(err, kerr.InvalidFetchSessionEpoch) {
				f.log.Warn("batch fetcher: fetch failed; retrying", "broker", b.id, "err", err)
				select {
				case <-f.ctx.Done():
				case <-time.After(f.cfg.RetryBackoff):
				}
			}
			b.sessionID, b.sessionEpoch = 0, 0
			clear(b.inSession)
			continue
		}
		b.sessionUpdated(req, resp.(*kmsg.FetchResponse))
		b.handle(resp.(*kmsg.FetchResponse), req, asked)
	}
}

// request builds the next fetch: with no session, every partition the loop
// fetches; in a session, those whose position moved or that are new, and
// the ones to forget. It returns nil when there is nothing to ask.
func (b *brokerLoop) request() (*kmsg.FetchRequest, map[leaders.TopicPartition]requested) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.IsolationLevel =
		-1, int32(f.cfg.MaxWait.Milliseconds()), 1, f.cfg.MaxBytes, 1
	full := b.sessionID == 0
	if full {
		clear(b.inSession)
	}
	req.SessionID, req.SessionEpoch = b.sessionID, b.sessionEpoch
	asked := map[leaders.TopicPartition]requested{}
	topics := map[string]int{}
	for tp, l := range b.assigned {
		p := f.parts[tp]
		if p == nil || p.stopped || p.broker != b.id {
			continue
		}
		asked[tp] = requested{p: p, offset: p.offset}
		if e, ok := b.inSession[tp]; ok && e.offset == p.offset {
			continue // the session already holds this position
		}
		i, ok := topics[tp.Topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = tp.Topic, l.TopicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topics[tp.Topic] = i
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = tp.Partition, p.offset, f.cfg.PartitionMaxBytes
		fp.CurrentLeaderEpoch, fp.LogStartOffset, fp.LastFetchedEpoch = l.Epoch, -1, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, fp)
	}
	forgotten := map[string]int{}
	for tp, e := range b.inSession {
		if _, ok := asked[tp]; ok {
			continue
		}
		i, ok := forgotten[tp.Topic]
		if !ok {
			t := kmsg.NewFetchRequestForgottenTopic()
			t.Topic, t.TopicID = tp.Topic, e.topicID
			req.ForgottenTopics = append(req.ForgottenTopics, t)
			i = len(req.ForgottenTopics) - 1
			forgotten[tp.Topic] = i
		}
		req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, tp.Partition)
	}
	if len(asked) == 0 && len(req.ForgottenTopics) == 0 {
		return nil, nil
	}
	return req, asked
}

// sessionUpdated records what the broker's session now holds after req.
func (b *brokerLoop) sessionUpdated(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) {
	if b.sessionID == 0 {
		// A full request asked for a new session; a broker without
		// sessions answers id 0, and every request stays full.
		b.sessionID, b.sessionEpoch = resp.SessionID, 1
		if b.sessionID == 0 {
			b.sessionEpoch = 0
			return
		}
	} else {
		b.sessionEpoch++
		if b.sessionEpoch == math.MaxInt32 {
			b.sessionEpoch = 1
		}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			b.inSession[leaders.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = sessionEntry{offset: p.FetchOffset, topicID: t.TopicID}
		}
	}
	for _, t := range req.ForgottenTopics {
		for _, p := range t.Partitions {
			delete(b.inSession, leaders.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
}

// handle hands each partition's part of a response to its deliver. From
// v13 the response names topics by id only.
func (b *brokerLoop) handle(resp *kmsg.FetchResponse, req *kmsg.FetchRequest, asked map[leaders.TopicPartition]requested) {
	names := map[[16]byte]string{}
	for _, t := range req.Topics {
		names[t.TopicID] = t.Topic
	}
	b.f.mu.Lock()
	for tp, l := range b.assigned {
		names[l.TopicID] = tp.Topic
	}
	b.f.mu.Unlock()
	for _, t := range resp.Topics {
		topic := cmp.Or(t.Topic, names[t.TopicID])
		for i := range t.Partitions {
			tp := leaders.TopicPartition{Topic: topic, Partition: t.Partitions[i].Partition}
			if r, ok := asked[tp]; ok {
				b.deliver(tp, r, &t.Partitions[i])
			}
		}
	}
}

// deliver hands one partition's part of a response to its deliver.
func (b *brokerLoop) deliver(tp leaders.TopicPartition, r requested, rp *kmsg.FetchResponseTopicPartition) {
	f := b.f
	f.mu.Lock()
	p := f.parts[tp]
	if p != r.p || p.stopped || p.broker != b.id {
		f.mu.Unlock() // removed, added again or moved meanwhile
		return
	}
	err := kerr.ErrorForCode(rp.ErrorCode)
	if leaderMoved(err) {
		delete(b.assigned, tp)
		f.unassignLocked(tp)
		f.mu.Unlock()
		return
	}
	out := Fetched{Topic: tp.Topic, Partition: tp.Partition, HighWatermark: rp.HighWatermark,
		LastStableOffset: rp.LastStableOffset, LogStartOffset: rp.LogStartOffset, Err: err}
	if err == nil {
		out.Batches, out.Err = recordbatch.Split(rp.RecordBatches)
		for _, a := range rp.AbortedTransactions {
			out.Aborted = append(out.Aborted, recordbatch.Aborted{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	if out.Err != nil {
		p.stopped = true
		delete(b.assigned, tp)
		b.signal() // forget it in the session
	} else if n := len(out.Batches); n > 0 && p.offset == r.offset {
		p.offset = max(p.offset, out.Batches[n-1].NextOffset())
	}
	p.delivering = true
	deliver := p.deliver
	f.mu.Unlock()

	deliver(out)

	f.mu.Lock()
	p.delivering = false
	f.cond.Broadcast()
	f.mu.Unlock()
}

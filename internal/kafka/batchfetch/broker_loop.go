package batchfetch

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/leaders"
	"kmirror/internal/kafka/recordbatch"
)

// brokerLoop fetches the partitions one broker leads, in one fetch session.
type brokerLoop struct {
	f  *Fetcher
	id int32
	// assigned are the partitions this loop fetches, with their leader;
	// guarded by f.mu.
	assigned map[leaders.TopicPartition]leaders.Leader
	// changed are the partitions whose assignment or position changed
	// since the last request: in a session, a request looks at these
	// only, not at every partition the loop fetches, so a request's cost
	// follows what moved rather than how many partitions the loop holds,
	// quiet ones included. names are the topics' names by id, for responses
	// that name topics by id. Both guarded by f.mu.
	changed map[leaders.TopicPartition]struct{}
	names   map[[16]byte]string
	wake    chan struct{}
	// polling: a request of the loop is in flight, maybe a long poll of
	// quiet partitions. A partition added meanwhile would wait it out (up
	// to MaxWait, at every resume and take-over), so it is fetched at once
	// on a connection of its own (side) until the loop can ask for it.
	// sideWant are those partitions; both guarded by f.mu.
	polling  bool
	sideWant map[leaders.TopicPartition]struct{}
	// asking are the partitions the loop's request in flight asks for:
	// its answer brings them, so the side does not fetch them too (the
	// same bytes read twice). Guarded by f.mu.
	asking   map[leaders.TopicPartition]requested
	sideWake chan struct{}

	// The session, the loop's own: its id and next epoch (id 0: none),
	// and the position it holds for each partition.
	sessionID, sessionEpoch int32
	inSession               map[leaders.TopicPartition]sessionEntry
	// failures counts the loop's failed requests in a row, for the
	// back-off; health hears of each (nil: no one listens).
	failures int
	health   Health
	// hasty counts the answers in a row that brought no record and came
	// back well within the max wait (hastyAnswer).
	hasty int
}

// sessionEntry is what the broker's session holds for a partition: its
// position, its topic's id (to forget it by), and the partition it was
// asked for (a partition removed and added again is another).
type sessionEntry struct {
	offset   int64
	epoch    int32 // the LastFetchedEpoch asked with
	maxBytes int32 // the PartitionMaxBytes asked with
	topicID  [16]byte
	p        *partition
}

func newBrokerLoop(f *Fetcher, id int32) *brokerLoop {
	var health Health
	if f.cfg.Health != nil {
		health = f.cfg.Health(id)
	}
	return &brokerLoop{f: f, id: id, health: health, assigned: map[leaders.TopicPartition]leaders.Leader{},
		changed: map[leaders.TopicPartition]struct{}{}, names: map[[16]byte]string{},
		wake: make(chan struct{}, 1), inSession: map[leaders.TopicPartition]sessionEntry{},
		sideWant: map[leaders.TopicPartition]struct{}{}, sideWake: make(chan struct{}, 1),
		asking: map[leaders.TopicPartition]requested{}}
}

// add and drop change what the loop fetches; f.mu is held.
func (b *brokerLoop) add(tp leaders.TopicPartition, l leaders.Leader) {
	b.assigned[tp] = l
	b.names[l.TopicID] = tp.Topic
	b.changed[tp] = struct{}{}
	b.signal()
	if b.polling && b.f.cfg.SideClient != nil {
		b.sideWant[tp] = struct{}{}
		select {
		case b.sideWake <- struct{}{}:
		default:
		}
	}
}

func (b *brokerLoop) drop(tp leaders.TopicPartition) {
	delete(b.assigned, tp)
	b.changed[tp] = struct{}{}
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
	p        *partition
	offset   int64
	epoch    int32 // the LastFetchedEpoch asked with
	maxBytes int32 // the PartitionMaxBytes asked with
}

func (b *brokerLoop) run() {
	f := b.f
	defer f.wg.Done()
	if f.cfg.SideClient != nil {
		f.wg.Add(1)
		go b.side()
	}
	for f.ctx.Err() == nil {
		req, sent := b.request()
		if req == nil {
			select {
			case <-f.ctx.Done():
			case <-b.wake:
			}
			continue
		}
		asked := time.Now()
		resp, err := b.fetch(f.cfg.Client, req)
		f.mu.Lock()
		b.polling = false
		clear(b.asking)
		f.mu.Unlock()
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			if f.ctx.Err() != nil {
				return
			}
			// A session the broker no longer knows, or any failed
			// request: the next request starts a new session, with every
			// partition in it.
			if !errors.Is(err, kerr.FetchSessionIDNotFound) && !errors.Is(err, kerr.InvalidFetchSessionEpoch) {
				b.failures++
				wait := b.backoff()
				f.log.Warn("batch fetcher: fetch failed; retrying", "broker", b.id, "err", err, "failures", b.failures, "backoff", wait)
				if b.health != nil {
					b.health.Failed(fmt.Errorf("fetch from broker %d: %w", b.id, err))
				}
				select {
				case <-f.ctx.Done():
				case <-time.After(wait):
				}
			}
			b.sessionID, b.sessionEpoch = 0, 0
			clear(b.inSession)
			continue
		}
		b.failures = 0
		if b.health != nil {
			b.health.Succeeded()
		}
		full := b.sessionID == 0
		b.sessionUpdated(req, resp, sent)
		b.handle(resp, sent, full)
		if wait := b.hastyAnswer(resp, time.Since(asked)); wait > 0 {
			select {
			case <-f.ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}

// hastyAnswer returns how long to wait before the next request after an
// answer that took took. A broker holds a fetch that finds nothing new for
// the max wait; one that answers at once with no record, again and again,
// would have the loop ask thousands of times a second for nothing (a
// broken or hostile broker). Such answers in a row space the requests from
// a millisecond, doubling up to the max wait; an answer with records, or
// one that took its time, ends the run. An honest broker's odd quick empty
// answer (a session's first, a change of its partitions' ends) costs a
// millisecond.
func (b *brokerLoop) hastyAnswer(resp *kmsg.FetchResponse, took time.Duration) time.Duration {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if len(resp.Topics[i].Partitions[j].RecordBatches) > 0 {
				b.hasty = 0
				return 0
			}
		}
	}
	if took >= b.f.cfg.MaxWait/2 {
		b.hasty = 0
		return 0
	}
	b.hasty++
	return min(time.Millisecond<<min(b.hasty-1, 20), b.f.cfg.MaxWait)
}

// backoff is the wait before the next request after b.failures failed
// ones in a row: RetryBackoff doubled at each, up to MaxRetryBackoff, less
// up to a fifth at random so that the loops of several instances facing
// one bad broker do not ask in step.
func (b *brokerLoop) backoff() time.Duration {
	cfg := b.f.cfg
	d := cfg.MaxRetryBackoff
	if shift := b.failures - 1; shift < 20 {
		d = min(d, cfg.RetryBackoff<<shift)
	}
	return d - rand.N(d/5+1)
}

// fetch sends a request to the loop's broker on cl's fetch connection.
func (b *brokerLoop) fetch(cl *kgo.Client, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp, err := cl.Broker(int(b.id)).Request(b.f.ctx, req)
	if err != nil {
		return nil, err
	}
	if v := req.GetVersion(); v < minFetchVersion {
		return nil, fmt.Errorf("broker %d answers fetches up to version %d; read_committed needs %d", b.id, v, minFetchVersion)
	}
	return resp.(*kmsg.FetchResponse), nil
}

// minFetchVersion is the first with isolation levels (read_committed) and
// aborted transactions.
const minFetchVersion = 4

// request builds the next fetch: with no session, every partition the loop
// fetches; in a session, those whose position moved or that are new, and
// the ones to forget, found among the partitions that changed since the
// last request. It returns nil when there is nothing to ask, and the
// partitions it asks for, with the positions asked.
func (b *brokerLoop) request() (*kmsg.FetchRequest, map[leaders.TopicPartition]requested) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.IsolationLevel =
		-1, int32(f.cfg.MaxWait.Milliseconds()), 1, f.cfg.MaxBytes, 1
	req.SessionID, req.SessionEpoch = b.sessionID, b.sessionEpoch
	sent := map[leaders.TopicPartition]requested{}
	topics := map[string]int{}
	ask := func(tp leaders.TopicPartition, l leaders.Leader, p *partition) {
		askFor(req, topics, sent, tp, l, p, p.maxBytes(f.cfg.PartitionMaxBytes))
	}
	forgotten := map[string]int{}
	forget := func(tp leaders.TopicPartition, e sessionEntry) {
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
	if b.sessionID == 0 {
		clear(b.inSession)
		for tp, l := range b.assigned {
			if p := b.fetching(tp); p != nil && !p.side {
				ask(tp, l, p)
			}
		}
		for tp := range b.changed {
			if p := b.fetching(tp); p == nil || !p.side {
				delete(b.changed, tp)
			}
		}
	} else {
		for tp := range b.changed {
			p := b.fetching(tp)
			if p != nil && p.side {
				// Fetched on the side; asked for once it is back. The
				// session forgets it meanwhile, or every answer would
				// bring its bytes again from the position the session
				// holds, only to be dropped.
				if e, inSession := b.inSession[tp]; inSession {
					forget(tp, e)
				}
				continue
			}
			delete(b.changed, tp)
			e, inSession := b.inSession[tp]
			switch {
			case p != nil && (!inSession || e.offset != p.offset || e.p != p || e.maxBytes != p.maxBytes(f.cfg.PartitionMaxBytes)):
				ask(tp, b.assigned[tp], p)
			case p == nil && inSession:
				forget(tp, e)
			}
		}
	}
	// A session's request naming nothing still asks for what the session
	// holds: it is the next long poll.
	if len(sent) == 0 && len(req.ForgottenTopics) == 0 && (b.sessionID == 0 || len(b.inSession) == 0) {
		return nil, nil
	}
	b.polling = true
	maps.Copy(b.asking, sent)
	return req, sent
}

// askFor adds a partition to a fetch request at its position, and to
// sent.
func askFor(req *kmsg.FetchRequest, topics map[string]int, sent map[leaders.TopicPartition]requested,
	tp leaders.TopicPartition, l leaders.Leader, p *partition, maxBytes int32) {
	sent[tp] = requested{p: p, offset: p.offset, epoch: p.lastEpoch, maxBytes: maxBytes}
	i, ok := topics[tp.Topic]
	if !ok {
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = tp.Topic, l.TopicID
		req.Topics = append(req.Topics, t)
		i = len(req.Topics) - 1
		topics[tp.Topic] = i
	}
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = tp.Partition, p.offset, maxBytes
	fp.CurrentLeaderEpoch, fp.LogStartOffset, fp.LastFetchedEpoch = l.Epoch, -1, p.lastEpoch
	req.Topics[i].Partitions = append(req.Topics[i].Partitions, fp)
}

// side fetches, on a connection of its own and without a session, the
// partitions added while the loop's request is in flight: at once, and
// again while they have more and that request is still out. Then they are
// the loop's again, asked for at their new positions in its next request.
func (b *brokerLoop) side() {
	f := b.f
	defer f.wg.Done()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-b.sideWake:
		}
		for f.ctx.Err() == nil {
			req, sent := b.sideRequest()
			if req == nil {
				break
			}
			resp, err := b.fetch(f.cfg.SideClient, req)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			if err == nil {
				b.handle(resp, sent, true)
			}
			b.sideDone(sent, err == nil)
			if err != nil {
				if f.ctx.Err() == nil {
					f.log.Debug("batch fetcher: a fetch of added partitions failed; the loop asks for them", "broker", b.id, "err", err)
				}
				break
			}
		}
	}
}

// sideRequest builds a side fetch of the partitions waiting for one, or
// returns nil if there are none or the loop's request has come back.
func (b *brokerLoop) sideRequest() (*kmsg.FetchRequest, map[leaders.TopicPartition]requested) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if !b.polling {
		clear(b.sideWant)
		return nil, nil
	}
	req := kmsg.NewPtrFetchRequest()
	// No session (epoch -1), and no wait: what is there now.
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.IsolationLevel = -1, 0, 1, f.cfg.MaxBytes, 1
	req.SessionID, req.SessionEpoch = 0, -1
	sent := map[leaders.TopicPartition]requested{}
	topics := map[string]int{}
	for tp := range b.sideWant {
		p := b.fetching(tp)
		if r, asked := b.asking[tp]; asked && p != nil && r.p == p && r.offset == p.offset {
			continue // the loop's request in flight brings it
		}
		if p != nil && !p.side {
			p.side = true
			askFor(req, topics, sent, tp, b.assigned[tp], p, p.maxBytes(f.cfg.PartitionMaxBytes))
		}
	}
	clear(b.sideWant)
	if len(sent) == 0 {
		return nil, nil
	}
	return req, sent
}

// sideDone hands a side fetch's partitions back to the loop, and asks
// again on the side for those that had something while the loop's
// request is still out.
func (b *brokerLoop) sideDone(sent map[leaders.TopicPartition]requested, ok bool) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for tp, r := range sent {
		r.p.side = false
		b.changed[tp] = struct{}{}
		if ok && b.polling && f.parts[tp] == r.p && !r.p.stopped && r.p.offset != r.offset {
			b.sideWant[tp] = struct{}{}
		}
	}
	b.signal()
}

// fetching returns the partition if this loop fetches it; f.mu is held.
func (b *brokerLoop) fetching(tp leaders.TopicPartition) *partition {
	if _, ok := b.assigned[tp]; !ok {
		return nil
	}
	p := b.f.parts[tp]
	if p == nil || p.stopped || p.broker != b.id {
		return nil
	}
	return p
}

// sessionUpdated records what the broker's session now holds after req.
func (b *brokerLoop) sessionUpdated(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, sent map[leaders.TopicPartition]requested) {
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
			tp := leaders.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			b.inSession[tp] = sessionEntry{offset: p.FetchOffset, epoch: p.LastFetchedEpoch, maxBytes: p.PartitionMaxBytes,
				topicID: t.TopicID, p: sent[tp].p}
		}
	}
	for _, t := range req.ForgottenTopics {
		for _, p := range t.Partitions {
			delete(b.inSession, leaders.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
}

// handle hands each partition's part of a response to its deliver, the
// partitions taking turns (deliverInTurns): a full
// request's partitions as sent, a session's as the session holds them (a
// session's response has the partitions with something to say, asked for
// in this request or an earlier one). From v13 the response names topics
// by id only.
func (b *brokerLoop) handle(resp *kmsg.FetchResponse, sent map[leaders.TopicPartition]requested, full bool) {
	var turns []*pieces
	before := 0 // record bytes of the response ahead of a partition's
	for _, t := range resp.Topics {
		topic := t.Topic
		if topic == "" {
			b.f.mu.Lock()
			topic = b.names[t.TopicID]
			b.f.mu.Unlock()
		}
		for i := range t.Partitions {
			tp := leaders.TopicPartition{Topic: topic, Partition: t.Partitions[i].Partition}
			r, ok := sent[tp]
			if !full {
				var e sessionEntry
				if e, ok = b.inSession[tp]; ok {
					r = requested{p: e.p, offset: e.offset, epoch: e.epoch, maxBytes: e.maxBytes}
				}
			}
			if ok && r.p != nil {
				if ps := b.prepare(tp, r, &t.Partitions[i], before); ps != nil {
					turns = append(turns, ps)
				}
			}
			before += len(t.Partitions[i].RecordBatches)
		}
	}
	b.deliverInTurns(turns)
}

// prepare splits one partition's part of a response into the pieces its
// deliver is handed, and moves the partition's position past them. It
// returns nil when the partition is no longer fetched here.
func (b *brokerLoop) prepare(tp leaders.TopicPartition, r requested, rp *kmsg.FetchResponseTopicPartition, before int) *pieces {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.parts[tp]
	if p != r.p || p.stopped || p.broker != b.id {
		return nil // removed, added again or moved meanwhile
	}
	err := kerr.ErrorForCode(rp.ErrorCode)
	if refetch(err) {
		b.drop(tp)
		f.unassignLocked(tp)
		if f.cfg.Trouble != nil {
			f.cfg.Trouble(tp.Topic, tp.Partition, err)
		}
		return nil
	}
	if err == nil && p.offset == r.offset {
		var again bool
		if err, again = diverged(tp, r, rp.DivergingEpoch); again {
			p.lastEpoch = -1
			b.changed[tp] = struct{}{}
			return nil
		}
	}
	out := Fetched{Topic: tp.Topic, Partition: tp.Partition, HighWatermark: rp.HighWatermark,
		LastStableOffset: rp.LastStableOffset, LogStartOffset: rp.LogStartOffset, Err: err}
	if err == nil {
		var again bool
		if out.Batches, err = recordbatch.Split(rp.RecordBatches); err != nil {
			offset := r.offset
			if n := len(out.Batches); n > 0 {
				offset = out.Batches[n-1].NextOffset()
			}
			err = &BadBatchError{Topic: tp.Topic, Partition: tp.Partition, Offset: offset, Err: err}
		} else if err, again = b.checkBatches(tp, p, r, rp, out.Batches, before); again {
			b.changed[tp] = struct{}{} // asked for again at once, with room for its batch
			return nil
		}
		if out.Err = err; err != nil {
			out.Batches = nil // nothing of a bad answer is copied
		}
		for _, a := range rp.AbortedTransactions {
			out.Aborted = append(out.Aborted, recordbatch.Aborted{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	if out.Err != nil {
		p.stopped = true
		b.drop(tp) // forget it in the session
		return &pieces{p: p, tp: tp, rest: []Fetched{out}}
	} else if n := len(out.Batches); n > 0 && p.offset == r.offset {
		p.offset = max(p.offset, out.Batches[n-1].NextOffset())
		p.lastEpoch = out.Batches[n-1].LeaderEpoch
		p.boundary, p.wantBytes = true, 0
		b.changed[tp] = struct{}{}
	}
	return &pieces{p: p, tp: tp, rest: split(out, int(f.cfg.PieceBytes))}
}

// deliverInTurns hands the partitions' pieces on in turns, a piece of each
// in each round, so that a mirror's throttle, which holds every delivery
// up, paces the partitions evenly: handing on each partition's part whole
// let one partition's megabyte go before the next one's started.
func (b *brokerLoop) deliverInTurns(turns []*pieces) {
	for len(turns) > 0 {
		next := turns[:0]
		for _, ps := range turns {
			b.deliver(ps.tp, ps.p, ps.rest[0])
			if ps.rest = ps.rest[1:]; len(ps.rest) > 0 {
				next = append(next, ps)
			}
		}
		turns = next
	}
}

// deliver hands one piece of a partition's part of a response to its
// deliver, unless the partition was removed or added again since the
// response came. Only this loop moves its partitions elsewhere, in
// prepare, so a partition with pieces left is still this loop's.
func (b *brokerLoop) deliver(tp leaders.TopicPartition, p *partition, out Fetched) {
	f := b.f
	f.mu.Lock()
	if f.parts[tp] != p {
		f.mu.Unlock() // removed, or added again, between two pieces
		return
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

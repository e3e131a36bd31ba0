package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/workers/lease"
	"kmirror/workers/partition/metrics"
	"kmirror/workers/partition/worker"
)

// The destination watch finds a destination that lost what kmirror wrote:
// a cluster rebuilt empty, disks replaced, a topic deleted by hand. kgo
// cannot tell: the idempotent producer retries a record whose request was
// in flight when the broker went away until it learns the outcome, and a
// topic that no longer exists never gives one (UNKNOWN_TOPIC_OR_PARTITION
// without end). The partitions then read MIRRORING with no error while
// nothing moves. So the engine asks the destination itself, but only about
// copies that stopped being answered: a healthy instance sends nothing.
//
// Everything the watch asks and finds is by destination topic name: with
// topic.name.prefix two mirrors' partitions of one source name write two
// destination topics, and the loss of one never touches the other's
// sessions. Partitions are still named by their keys (source names).

// destinationWatchEvery is how often copies in flight are looked at for
// having gone unanswered (with the clients' health, in watchHealth).
const destinationWatchEvery = time.Second

// destinationCheckTimeout bounds one listing of the destination's ends.
const destinationCheckTimeout = 2 * time.Second

// destinationWatch is the destination watch (worker.DestinationWatch): the
// running sessions' copies and ended sessions' copies still in flight
// (unsettled.go), what the destination was found to have lost, and the
// running workers' pokes. It asks the destination through the engine's
// admin client and writes copies off through its producer, both set as
// the engine starts.
type destinationWatch struct {
	admin          *kadm.Client
	producer       *batchproduce.Producer
	desired        *desiredStates
	settings       *copySettings
	metrics        *metrics.Metrics
	log            *slog.Logger
	settledWaitMax time.Duration

	mu sync.Mutex
	// pokes are the running workers' (register).
	pokes map[lease.Key]chan struct{}
	// sessions are the running mirroring sessions; losses are what the
	// watch found, for each partition's worker to report; lostTopics when
	// it found each destination topic gone; unsettled are ended sessions'
	// copies still in flight.
	sessions   map[lease.Key]*watchedSession
	losses     map[lease.Key]destinationLoss
	lostTopics map[string]time.Time
	unsettled  map[lease.Key]*unsettledCopies
}

func newDestinationWatch(desired *desiredStates, settings *copySettings, m *metrics.Metrics, log *slog.Logger,
	settledWaitMax time.Duration) *destinationWatch {
	return &destinationWatch{desired: desired, settings: settings, metrics: m, log: log, settledWaitMax: settledWaitMax,
		pokes: map[lease.Key]chan struct{}{}, sessions: map[lease.Key]*watchedSession{},
		losses: map[lease.Key]destinationLoss{}, lostTopics: map[string]time.Time{},
		unsettled: map[lease.Key]*unsettledCopies{}}
}

// register makes partition k's running worker known to the watch, which
// pokes it on pokes when it finds what failed it, until unregister.
func (w *destinationWatch) register(k lease.Key) (pokes chan struct{}, unregister func()) {
	pokes = make(chan struct{}, 1)
	w.mu.Lock()
	w.pokes[k] = pokes
	w.mu.Unlock()
	return pokes, func() {
		w.mu.Lock()
		if w.pokes[k] == pokes {
			delete(w.pokes, k)
		}
		w.mu.Unlock()
	}
}

// mirroring says, for each key, whether a mirroring session runs, under
// one lock.
func (w *destinationWatch) mirroring(keys []lease.Key) []bool {
	out := make([]bool, len(keys))
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, k := range keys {
		out[i] = w.sessions[k] != nil
	}
	return out
}

// destinationLoss is a loss the watch found for one partition, for the
// worker to report and heal.
type destinationLoss struct {
	msg string
	// end is the destination's end offset the watch found (0 when the
	// topic or the partition is gone).
	end int64
	at  time.Time
}

// stallCheck is a partition whose copies are in flight and unanswered for
// a whole watch interval.
type stallCheck struct {
	key lease.Key
	// dest is the destination topic the copies went to.
	dest string
	// verified is the destination offset below which every copy was
	// acknowledged, read before the destination's end is listed: that end
	// can only be lower if the destination lost acknowledged records.
	verified int64
}

// stalledCopies returns the partitions whose in-flight copies (of a
// running session or of an ended one's, unsettled.go) got no result since
// the last call; last carries the result counts from call to call.
func (w *destinationWatch) stalledCopies(last map[*batchproduce.Acks]int64) []stallCheck {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := make(map[*batchproduce.Acks]int64, len(last))
	var out []stallCheck
	consider := func(k lease.Key, dest string, a *batchproduce.Acks, end int64) {
		done := a.Done()
		if a.Base()+done >= end {
			return // nothing in flight
		}
		seen[a] = done
		if prev, ok := last[a]; ok && prev == done {
			out = append(out, stallCheck{key: k, dest: dest, verified: a.Base() + a.Verified()})
		}
	}
	for k, s := range w.sessions {
		consider(k, s.dest, s.acks, s.acks.ProducedEnd())
	}
	for k, u := range w.unsettled {
		consider(k, u.dest, u.acks, u.end)
	}
	clear(last)
	for a, n := range seen {
		last[a] = n
	}
	return out
}

// destinationSweepEvery is how often every session's destination is
// checked, stalled or not: a partition that copies nothing has no copy to
// go unanswered, and its destination topic may be gone all the same. Its
// row must stop showing the destination end it last saw within seconds
// (with the watch's tick and the row's write, about 3.5 s at most): one
// listing of the sessions' destination topics every 2 s.
const destinationSweepEvery = 2 * time.Second

// sessionChecks returns a check of every running session.
func (w *destinationWatch) sessionChecks() []stallCheck {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]stallCheck, 0, len(w.sessions))
	for k, s := range w.sessions {
		out = append(out, stallCheck{key: k, dest: s.dest, verified: s.acks.Base() + s.acks.Verified()})
	}
	return out
}

// checkDestination lists the destination's ends of the stalled partitions'
// destination topics and treats each partition whose topic is gone, or
// whose end fell below what it had acknowledged, as lost. An unreachable
// destination tells nothing: the outage is reported as it is, by the
// producer's health.
func (w *destinationWatch) checkDestination(ctx context.Context, checks []stallCheck) {
	if len(checks) == 0 {
		return
	}
	topics := distinct(checks, func(c stallCheck) string { return c.dest })
	if len(topics) == 0 {
		return // listing no topic would list every one
	}
	ctx, cancel := context.WithTimeout(ctx, destinationCheckTimeout)
	defer cancel()
	ends, err := w.admin.ListEndOffsets(ctx, topics...)
	if err != nil {
		return
	}
	missing := map[string]bool{}
	seen := make(map[lease.Key]bool, len(checks))
	for _, c := range checks {
		if seen[c.key] || c.dest == "" {
			continue // stalled, and swept too
		}
		seen[c.key] = true
		switch reason, end, topicGone := lossOf(ends, c.dest, c.key.Partition, c.verified); {
		case topicGone:
			missing[c.dest] = true // every partition of the topic, below
		case reason != "":
			w.destinationLost(c.key, reason, end)
		}
	}
	for topic := range missing {
		w.topicLost(topic)
	}
}

// lossOf says what the destination lost of partition p of destination
// topic dest, given its listed ends and the offset below which copies were
// acknowledged ("" if nothing), and whether the whole topic is gone.
func lossOf(ends kadm.ListedOffsets, dest string, p int32, verified int64) (reason string, end int64, topicGone bool) {
	parts, listed := ends[dest]
	if o, ok := parts[-1]; ok && errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
		return "", 0, true
	}
	o, ok := parts[p]
	switch {
	case !listed:
		return "", 0, false
	case !ok || errors.Is(o.Err, kerr.UnknownTopicOrPartition):
		return fmt.Sprintf("partition %d of topic %s is missing on the destination", p, dest), 0, false
	case o.Err == nil && o.Offset < verified:
		return fmt.Sprintf("its destination end is %d, below the %d record(s) already copied", o.Offset, verified), o.Offset, false
	}
	return "", 0, false
}

// destinationLost records a loss for partition k and interrupts its
// session, so that its worker reports it and re-aligns: alignment then
// rewinds to what the destination still has.
func (w *destinationWatch) destinationLost(k lease.Key, reason string, end int64) {
	msg := "the destination lost this partition's records (" + reason + "); re-mirroring from what it still holds"
	w.mu.Lock()
	w.losses[k] = destinationLoss{msg: msg, end: end, at: time.Now()}
	s, poke := w.sessions[k], w.pokes[k]
	w.mu.Unlock()
	w.log.Warn("destination lost records", "mirror", k.Mirror, "topic", k.Topic, "partition", k.Partition, "reason", reason)
	w.metrics.Lost(k.Mirror, k.Topic)
	if s != nil {
		s.interrupt(worker.Interruption{Msg: msg, Cause: reason, Lost: true})
	}
	if poke != nil {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
}

// topicLost handles a destination topic that is gone: every partition
// held here that writes it is lost, and the copies in flight to it are
// written off, since no broker will ever answer them. The topic is not
// created again before topicLossGrace has passed, so that other instances,
// which notice within a watch interval or two, write off theirs first:
// with a broker that takes produce requests by topic name (before Produce
// v13), a copy still retried could otherwise land in the new topic.
func (w *destinationWatch) topicLost(topic string) {
	w.mu.Lock()
	held := make([]lease.Key, 0, len(w.pokes))
	for k := range w.pokes {
		held = append(held, k)
	}
	// Ended sessions' copies without a worker need only the write-off.
	w.lostTopics[topic] = time.Now()
	w.mu.Unlock()
	var keys []lease.Key
	for i, dest := range w.desired.destTopics(held) {
		if dest == topic {
			keys = append(keys, held[i])
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Partition < keys[j].Partition })
	for _, k := range keys {
		w.destinationLost(k, fmt.Sprintf("topic %s is missing on the destination", topic), 0)
	}
	w.WriteOff(topic, "")
}

// WriteOff makes kgo fail every record of destination topic topic it
// holds, in flight or not, so that no partition waits on copies that will
// never be answered. Running sessions that write the topic are interrupted
// first (with why, unless they already were): their failed copies are a
// reason to re-align, not a failure.
func (w *destinationWatch) WriteOff(topic, why string) {
	if why != "" {
		w.mu.Lock()
		var ss []*watchedSession
		for _, s := range w.sessions {
			if s.dest == topic {
				ss = append(ss, s)
			}
		}
		w.mu.Unlock()
		for _, s := range ss {
			s.interrupt(worker.Interruption{Msg: why})
		}
		if len(ss) > 0 {
			w.log.Warn("writing off the copies in flight to a destination topic; its sessions re-align",
				"destination_topic", topic, "sessions", len(ss), "why", why)
		}
	}
	w.producer.Forget(topic, errWrittenOff)
}

// TakeLoss returns (and forgets) the loss the watch recorded for k.
func (w *destinationWatch) TakeLoss(k lease.Key) (worker.Loss, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.losses[k]
	delete(w.losses, k)
	// One a worker of an earlier lease never took is history by now.
	return worker.Loss{Msg: l.msg, DestinationEnd: l.end}, ok && time.Since(l.at) < lossMemory
}

// Watch puts a running session where the watch finds it until remove:
// its copies are looked at for going unanswered, and a loss or a
// write-off of its topic is sent on interrupted.
func (w *destinationWatch) Watch(k lease.Key, topic string, acks *batchproduce.Acks) (<-chan worker.Interruption, func()) {
	s := &watchedSession{dest: topic, acks: acks, interrupted: make(chan worker.Interruption, 1)}
	w.mu.Lock()
	w.sessions[k] = s
	w.mu.Unlock()
	w.settings.copying(k.Mirror, 1)
	return s.interrupted, func() {
		w.settings.copying(k.Mirror, -1)
		w.mu.Lock()
		if w.sessions[k] == s {
			delete(w.sessions, k)
		}
		w.mu.Unlock()
	}
}

// watchedSession is a running mirroring session as the watch knows it: the
// destination topic it writes, its copies' results, and where to tell it
// that it must end.
type watchedSession struct {
	dest        string
	acks        *batchproduce.Acks
	interrupted chan worker.Interruption
}

// interrupt tells the session to end and re-align; a session already told
// keeps the first reason.
func (s *watchedSession) interrupt(i worker.Interruption) {
	select {
	case s.interrupted <- i:
	default:
	}
}

// lossMemory is how long a loss waits for its partition's worker to take it.
const lossMemory = time.Minute

// topicLossGrace is how long a destination topic found missing is not
// created again (see topicLost).
const topicLossGrace = 3 * destinationWatchEvery

// awaitTopicLossGrace waits until a destination topic found missing may
// be created.
func (w *destinationWatch) awaitTopicLossGrace(ctx context.Context, topic string) error {
	w.mu.Lock()
	at, ok := w.lostTopics[topic]
	w.mu.Unlock()
	if !ok {
		return nil
	}
	wait := time.Until(at.Add(topicLossGrace))
	if wait <= 0 {
		w.mu.Lock()
		if w.lostTopics[topic] == at {
			delete(w.lostTopics, topic)
		}
		w.mu.Unlock()
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

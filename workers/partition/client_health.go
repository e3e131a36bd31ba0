package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/kafkaconn"
)

// clientHealth watches a Kafka client for the trouble kgo retries silently
// or waits out: the partitions then still read MIRRORING, and only this
// says why nothing moves. The source fetchers and the destination producer
// each have one. It knows two kinds of trouble:
//
//   - a run of failures of one kind of request to one broker (a refused or
//     dropped connection, a response that cannot be read). Only a request
//     of that kind to that broker that completes ends it: a broker that
//     answers metadata but drops every fetch is in trouble all the same.
//   - a request written and unanswered for longer than the broker may
//     take (stall), since a broker or a network that holds requests fails
//     none.
//
// Either way the trouble reads "cannot reach broker host:port", whatever
// answered at the broker's address (kafkaconn.CannotReachError: a source
// chooses the addresses it advertises); the log line at a run's start
// says what happened.
type clientHealth struct {
	// grace is how long a broker may legitimately hold a request before
	// it counts as stalled: a fetch's long poll.
	grace time.Duration
	log   *slog.Logger
	// now is time.Now, or a test's clock.
	now func() time.Time

	mu       sync.Mutex
	failing  map[requestSlot]*failureRun
	inFlight map[requestSlot][]time.Time // write times, oldest first
	addrs    map[int32]string            // the brokers' host:port
	// stallLogged is the write time of each slot's stalled request last
	// logged, so that each is logged once.
	stallLogged map[requestSlot]time.Time
}

// requestSlot is one kind of request to one broker. Connecting is key -1.
type requestSlot struct {
	node int32
	key  int16
}

const connectKey int16 = -1

// failureRun is a run of failures of one slot.
type failureRun struct {
	since, last time.Time
	err         error
}

// failureRunExpiry ends a run that has had no failure for this long: kgo
// stopped asking that broker (it left the cluster, or a seed broker is no
// longer needed), so nothing that completes would ever end it.
const failureRunExpiry = 15 * time.Second

func newClientHealth(grace time.Duration, log *slog.Logger) *clientHealth {
	return &clientHealth{grace: grace, log: log, now: time.Now, failing: map[requestSlot]*failureRun{},
		inFlight: map[requestSlot][]time.Time{}, addrs: map[int32]string{},
		stallLogged: map[requestSlot]time.Time{}}
}

var (
	_ kgo.HookBrokerConnect    = (*clientHealth)(nil)
	_ kgo.HookBrokerDisconnect = (*clientHealth)(nil)
	_ kgo.HookBrokerWrite      = (*clientHealth)(nil)
	_ kgo.HookBrokerE2E        = (*clientHealth)(nil)
)

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (h *clientHealth) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	slot := requestSlot{meta.NodeID, connectKey}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addrs[meta.NodeID] = kafkaconn.BrokerAddr(meta)
	if err != nil {
		h.failedLocked(slot, err)
		return
	}
	delete(h.failing, slot)
}

// OnBrokerDisconnect implements kgo.HookBrokerDisconnect: requests still
// waiting on a closed connection get no answer (kgo fails them without a
// hook); a retry writes them again.
func (h *clientHealth) OnBrokerDisconnect(meta kgo.BrokerMetadata, _ net.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for slot := range h.inFlight {
		if slot.node == meta.NodeID {
			delete(h.inFlight, slot)
		}
	}
}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (h *clientHealth) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return // the E2E hook reports it
	}
	slot := requestSlot{meta.NodeID, key}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addrs[meta.NodeID] = kafkaconn.BrokerAddr(meta)
	h.inFlight[slot] = append(h.inFlight[slot], h.now())
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (h *clientHealth) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	slot := requestSlot{meta.NodeID, key}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addrs[meta.NodeID] = kafkaconn.BrokerAddr(meta)
	if e2e.WriteErr == nil {
		// Answers come in the order of the writes on a connection, and a
		// client sends one kind of request to a broker on one connection.
		if q := h.inFlight[slot]; len(q) > 1 {
			h.inFlight[slot] = q[1:]
		} else {
			delete(h.inFlight, slot)
		}
	}
	if err := e2e.Err(); err != nil {
		h.failedLocked(slot, err)
		return
	}
	delete(h.failing, slot)
	delete(h.failing, requestSlot{meta.NodeID, connectKey})
	if meta.NodeID < 0 {
		return
	}
	// A seed broker (negative id) is asked only until the cluster's own
	// brokers are known: an answer from any of them ends its runs.
	for s := range h.failing {
		if s.node < 0 {
			delete(h.failing, s)
		}
	}
}

func (h *clientHealth) failedLocked(slot requestSlot, err error) {
	if errors.Is(err, context.Canceled) {
		return // the client is closing, or its caller gave up
	}
	now := h.now()
	r := h.failing[slot]
	if r == nil {
		r = &failureRun{since: now}
		h.failing[slot] = r
		h.log.Warn("cannot reach broker; retrying", "broker", h.addrs[slot.node], "request", slot.String(), "err", err)
	}
	r.last, r.err = now, err
}

// trouble returns the oldest trouble that has lasted at least d: a run of
// failures, or a request unanswered for d past the grace.
func (h *clientHealth) trouble(d time.Duration) (since time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	for slot, r := range h.failing {
		if now.Sub(r.last) > failureRunExpiry {
			delete(h.failing, slot)
			continue
		}
		if now.Sub(r.since) >= d && (since.IsZero() || r.since.Before(since)) {
			since, err = r.since, &kafkaconn.CannotReachError{Addrs: []string{h.addrs[slot.node]}}
		}
	}
	for slot, q := range h.inFlight {
		if len(q) == 0 {
			continue
		}
		stalled := q[0].Add(h.grace)
		if now.Sub(stalled) >= d && (since.IsZero() || stalled.Before(since)) {
			if !h.stallLogged[slot].Equal(q[0]) {
				h.stallLogged[slot] = q[0]
				h.log.Warn("cannot reach broker: a request is unanswered", "broker", h.addrs[slot.node], "request", slot.String(),
					"unanswered_for", now.Sub(q[0]).Round(time.Millisecond))
			}
			since, err = stalled, &kafkaconn.CannotReachError{Addrs: []string{h.addrs[slot.node]}}
		}
	}
	return since, err
}

// addr is a broker's host:port as the client's hooks saw it; "" before.
func (h *clientHealth) addr(node int32) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addrs[node]
}

func (s requestSlot) String() string {
	what := "connect"
	if s.key != connectKey {
		what = kmsg.NameForKey(s.key) + " request"
	}
	if s.node < 0 {
		return what + " to a bootstrap broker"
	}
	return fmt.Sprintf("%s to broker %d", what, s.node)
}

// troubleAfter is how long client trouble must last before it shows in a
// partition's error (it stays MIRRORING meanwhile): long enough that a
// leader moving or a connection being replaced does not show, short
// enough that with the engine's 1 s check and the row's write an operator
// sees it within 5 s.
const troubleAfter = 2 * time.Second

// healthChanges wakes the mirroring sessions when what a client's health
// would put in their rows changes, so that they need no tick of their own
// to notice: with thousands of partitions, a short tick in every session
// would be most of an idle instance's CPU.
type healthChanges struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each change
	last    map[*clientHealth]healthState
	// lastParts is the partitions' own troubles at the last check.
	lastParts string
}

type healthState struct {
	since time.Time
	err   string
}

func newHealthChanges() *healthChanges {
	return &healthChanges{changed: make(chan struct{}), last: map[*clientHealth]healthState{}}
}

// updated returns a channel closed at the next change.
func (h *healthChanges) updated() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// check compares each client's trouble (lasting at least d), and parts,
// the partitions' own troubles, with the last check's, and wakes the
// sessions if any differs.
func (h *healthChanges) check(clients []*clientHealth, d time.Duration, parts string) {
	now := make(map[*clientHealth]healthState, len(clients))
	for _, c := range clients {
		since, err := c.trouble(d)
		if err != nil {
			now[c] = healthState{since: since, err: err.Error()}
		} else {
			now[c] = healthState{}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	same := len(now) == len(h.last) && parts == h.lastParts
	h.lastParts = parts
	for c, st := range now {
		if old, ok := h.last[c]; !ok || old != st {
			same = false
		}
	}
	h.last = now
	if !same {
		close(h.changed)
		h.changed = make(chan struct{})
	}
}

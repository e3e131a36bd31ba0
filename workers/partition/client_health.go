package partition

import (
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/runtime/batchfetch"
)

// clientHealth watches a Kafka client for the errors kgo retries silently
// (a cluster that cannot be reached, requests that fail): the partitions
// then still read MIRRORING, and only this says why nothing moves. Any
// request that completes clears it. The source fetchers and the
// destination producer each have one.
type clientHealth struct {
	mu    sync.Mutex
	since time.Time // when the current run of errors began; zero if none
	err   error     // the latest error of the run
	// after, when set, is how long a run must last to be reported, in
	// place of what the caller asks.
	after time.Duration
}

var _ batchfetch.Health = (*clientHealth)(nil)

// Failed and Succeeded implement batchfetch.Health: a fetch loop's
// request failed, or completed.
func (h *clientHealth) Failed(err error) { h.failed(err) }

func (h *clientHealth) Succeeded() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.since, h.err = time.Time{}, nil
}

var (
	_ kgo.HookBrokerConnect = (*clientHealth)(nil)
	_ kgo.HookBrokerE2E     = (*clientHealth)(nil)
)

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (h *clientHealth) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.failed(err)
	}
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (h *clientHealth) OnBrokerE2E(_ kgo.BrokerMetadata, _ int16, e2e kgo.BrokerE2E) {
	if err := e2e.Err(); err != nil {
		h.failed(err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.since, h.err = time.Time{}, nil
}

func (h *clientHealth) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.IsZero() {
		h.since = time.Now()
	}
	h.err = err
}

// trouble returns the current run of errors, if it has lasted at least d.
func (h *clientHealth) trouble(d time.Duration) (since time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.after > 0 {
		d = h.after
	}
	if h.err == nil || time.Since(h.since) < d {
		return time.Time{}, nil
	}
	return h.since, h.err
}

// troubleAfter is how long client errors that kgo retries must last
// before they show in a partition's error (it stays MIRRORING meanwhile).
const troubleAfter = 5 * time.Second

// healthChanges wakes the mirroring sessions when what a client's health
// would put in their rows changes, so that they need no tick of their own
// to notice: at 1,000 partitions a 1 s tick in every session would be half
// of an idle instance's CPU (docs/benchmarks/idle.md, "Idle cost").
type healthChanges struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each change
	last    map[*clientHealth]healthState
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

// check compares each client's trouble (lasting at least d) with the last
// check's, and wakes the sessions if any differs.
func (h *healthChanges) check(clients []*clientHealth, d time.Duration) {
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
	same := len(now) == len(h.last)
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

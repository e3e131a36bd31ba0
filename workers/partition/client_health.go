package partition

import (
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
	if h.err == nil || time.Since(h.since) < d {
		return time.Time{}, nil
	}
	return h.since, h.err
}

package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"kmirror/internal/testnet"
)

// TestShutdownIsBounded: a SIGTERM (the server's context ending) while
// partition workers wait on a source that never answers still shuts the
// server down within the lease safety margin (TTL/3): stopping a worker
// interrupts whatever it waits on, except in-flight records, which settle
// within the delivery timeout.
func TestShutdownIsBounded(t *testing.T) {
	base, clusters, stop := startInProcessStoppable(t, slog.New(slog.DiscardHandler))
	c := apiClient{tb: t, base: base, http: &http.Client{Timeout: 60 * time.Second}}
	c.post("/v1/mirrors", fmt.Sprintf(`{"name":"m","source":{"bootstrap_servers":%q}}`, clusters.SourceAddr()))
	c.post("/v1/mirrors/m/topics:add", `{"topic":"bench"}`)
	c.waitAll("MIRRORING", 60*time.Second)

	// Point the mirror at a source that never answers, then pause and
	// resume: the resume's source check now waits on it.
	slow := testnet.NewBlackhole(t).Addr()
	if status, body := c.do("PATCH", "/v1/mirrors/m?skip_connectivity_check=true",
		fmt.Sprintf(`{"source":{"bootstrap_servers":%q}}`, slow)); status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", status, body)
	}
	c.post("/v1/mirrors/m/topics:pause", `{"topic":"bench"}`)
	c.waitAll("PAUSED", 30*time.Second)
	c.post("/v1/mirrors/m/topics:resume", `{"topic":"bench"}`)
	time.Sleep(time.Second) // let the workers get stuck in the check (they stay PAUSED)

	took := stop()
	margin := inProcessLeaseTTL / 3
	t.Logf("shut down in %s (lease margin %s)", took.Round(time.Millisecond), margin)
	if took > margin {
		t.Errorf("shutdown took %s, longer than the lease margin %s", took.Round(time.Millisecond), margin)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
)

// inProcessLeaseTTL is the in-process server's lease TTL; its safety
// margin is a third of it.
const inProcessLeaseTTL = 6 * time.Second

// startInProcess runs a full kmirror server (API, engine, syncer, lease
// manager, relay) in this process against a testdb database and kfake
// source and destination clusters; the source has a topic "bench" of 3
// partitions. It returns the API's base URL; cleanup stops everything.
func startInProcess(tb testing.TB, log *slog.Logger) (string, *devcluster.Clusters) {
	base, clusters, _ := startInProcessStoppable(tb, log)
	return base, clusters
}

// startInProcessStoppable is startInProcess that also returns stop, which
// stops the server (as SIGTERM does) and says how long that took.
func startInProcessStoppable(tb testing.TB, log *slog.Logger) (string, *devcluster.Clusters, func() time.Duration) {
	tb.Helper()
	s := startInProcessServer(tb, log)
	return s.base, s.clusters, s.stop
}

// inProcessServer is a running in-process server.
type inProcessServer struct {
	base     string // the API's base URL
	clusters *devcluster.Clusters
	dbURL    string // the server's database
	// stop stops the server (as SIGTERM does) and says how long that took.
	stop func() time.Duration
}

// startInProcessServer starts the server with the short lease TTL and
// delivery timeout the tests use; tune, when given, changes its config.
func startInProcessServer(tb testing.TB, log *slog.Logger, tune ...func(*serverConfig)) inProcessServer {
	tb.Helper()
	clusters, err := devcluster.Start(devcluster.Config{
		SourceOpts:      []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, "bench")},
		DestinationOpts: []kfake.Opt{kfake.NumBrokers(1)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(clusters.Close) // after the server stops: cleanups are LIFO
	return startServerOn(tb, log, clusters, tune...)
}

// startServerOn is startInProcessServer against clusters the caller
// started (and closes after the server: register its Close first).
func startServerOn(tb testing.TB, log *slog.Logger, clusters *devcluster.Clusters, tune ...func(*serverConfig)) inProcessServer {
	tb.Helper()
	dbURL := testdb.New(tb)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	serverErr := make(chan error, 1)
	cfg := serverConfig{
		Listen: "127.0.0.1:0", DatabaseURL: dbURL, InstanceID: "bench",
		Destination:        kafkaconn.Config{BootstrapServers: []string{clusters.DestinationAddr()}},
		LeaseTTL:           inProcessLeaseTTL,
		LeaseRenewInterval: time.Second,
		DeliveryTimeout:    time.Second,
		SourceTimeout:      2 * time.Second,
		// The benchmarks drive changes faster than a token may: they
		// measure kmirror, not the limiter.
		ChangeRate: -1,
		MaxStreams: -1,
		Logger:     log,
		Ready:      func(addr string) { ready <- addr },
	}
	for _, t := range tune {
		t(&cfg)
	}
	go func() { serverErr <- runServer(ctx, cfg) }()
	var stopOnce sync.Once
	var took time.Duration
	stop := func() time.Duration {
		stopOnce.Do(func() {
			start := time.Now()
			cancel()
			select {
			case err := <-serverErr:
				if err != nil {
					tb.Errorf("server: %v", err)
				}
			case <-time.After(60 * time.Second):
				var stacks bytes.Buffer
				_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
				tb.Errorf("server did not stop within 60s; goroutines:\n%s", stacks.String())
			}
			took = time.Since(start)
		})
		return took
	}
	tb.Cleanup(func() { stop() })
	select {
	case addr := <-ready:
		return inProcessServer{base: "http://" + addr, clusters: clusters, dbURL: dbURL, stop: stop}
	case err := <-serverErr:
		tb.Fatalf("server exited early: %v", err)
	case <-time.After(60 * time.Second):
		tb.Fatal("server did not become ready within 60s")
	}
	return inProcessServer{}
}

// apiClient calls the API, failing the test or benchmark on any error.
type apiClient struct {
	tb   testing.TB
	base string
	http *http.Client
	// token, when set, is sent as the bearer token.
	token string
}

// post sends body as JSON (or nothing) and wants a 2xx answer.
func (c apiClient) post(path, body string) {
	c.tb.Helper()
	status, out := c.do(http.MethodPost, path, body)
	if status/100 != 2 {
		c.tb.Fatalf("POST %s: %d: %s", path, status, bytes.TrimSpace(out))
	}
}

// waitAll polls GET /v1/partitions every effectPoll until all 3 partitions
// of the topic are in state.
func (c apiClient) waitAll(state string, timeout time.Duration) {
	c.tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(effectPoll)
	defer tick.Stop()
	var last []string
	for {
		if last = c.states(); len(last) == 3 && !slices.ContainsFunc(last, func(s string) bool { return s != state }) {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("partitions not all %s after %s: %v", state, timeout, last)
		}
		<-tick.C
	}
}

func (c apiClient) states() []string {
	c.tb.Helper()
	resp, err := c.http.Get(c.base + "/v1/partitions?mirror=m&topic=bench")
	if err != nil {
		c.tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		c.tb.Fatalf("GET /v1/partitions: %s: %s", resp.Status, bytes.TrimSpace(out))
	}
	var body struct {
		Partitions []struct {
			State string `json:"state"`
		} `json:"partitions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		c.tb.Fatal(err)
	}
	out := make([]string, len(body.Partitions))
	for i, p := range body.Partitions {
		out[i] = p.State
	}
	return out
}

// do sends a request and returns its status and body, failing only on a
// transport error.
func (c apiClient) do(method, path, body string) (int, []byte) {
	c.tb.Helper()
	status, _, out := c.doHeader(method, path, body)
	return status, out
}

// doHeader is do that also returns the answer's header.
func (c apiClient) doHeader(method, path, body string) (int, http.Header, []byte) {
	c.tb.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.tb.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.tb.Errorf("%s %s: %v", method, path, err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}

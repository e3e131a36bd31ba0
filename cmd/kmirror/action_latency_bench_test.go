package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/internal/devcluster"
	"kmirror/internal/kafkaconn"
	"kmirror/internal/testdb"
)

const (
	// actionRounds is how many times each action is measured, whatever b.N.
	actionRounds = 100
	// effectPoll is how often the benchmark reads GET /v1/partitions.
	effectPoll = 2 * time.Millisecond
	// effectTimeout bounds one action's wait for its effect.
	effectTimeout = 30 * time.Second
)

// BenchmarkActionToEffect measures, against a full in-process server (API,
// engine, metadata syncer, lease manager; Postgres from testdb; kfake source
// and destination), the time from an HTTP call until its effect is visible
// through the API:
//
//   - pause: POST topics:pause until every partition of the topic reads
//     PAUSED in GET /v1/partitions (polled every 2ms);
//   - resume: POST topics:resume until every partition reads MIRRORING;
//   - sync: POST /v1/mirrors/{m}:sync, which itself waits for a newer sync
//     result, so its latency is the HTTP round trip.
//
// One topic of 3 partitions, no traffic. Each action is measured 100 times
// (pauses and resumes alternate) in a single benchmark iteration, whatever
// b.N: run it with -benchtime=1x. It reports p50, p99 and max per action in
// milliseconds; ns/op (the whole run) is suppressed.
func BenchmarkActionToEffect(b *testing.B) {
	dbURL := testdb.New(b)
	clusters, err := devcluster.Start(devcluster.Config{
		SourceOpts:      []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, "bench")},
		DestinationOpts: []kfake.Opt{kfake.NumBrokers(1)},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(clusters.Close) // after the server stops: cleanups are LIFO

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	serverErr := make(chan error, 1)
	go func() {
		serverErr <- runServer(ctx, serverConfig{
			Listen: "127.0.0.1:0", DatabaseURL: dbURL, InstanceID: "bench",
			Destination:        kafkaconn.Config{BootstrapServers: []string{clusters.DestinationAddr()}},
			LeaseTTL:           6 * time.Second,
			LeaseRenewInterval: time.Second,
			DeliveryTimeout:    time.Second,
			SourceTimeout:      5 * time.Second,
			Logger:             slog.New(slog.DiscardHandler),
			Ready:              func(addr string) { ready <- addr },
		})
	}()
	b.Cleanup(func() {
		cancel()
		select {
		case err := <-serverErr:
			if err != nil {
				b.Errorf("server: %v", err)
			}
		case <-time.After(30 * time.Second):
			b.Error("server did not stop within 30s")
		}
	})
	var base string
	select {
	case addr := <-ready:
		base = "http://" + addr
	case err := <-serverErr:
		b.Fatalf("server exited early: %v", err)
	case <-time.After(60 * time.Second):
		b.Fatal("server did not become ready within 60s")
	}

	c := benchClient{b: b, base: base, http: &http.Client{Timeout: 60 * time.Second}}
	c.post("/v1/mirrors", fmt.Sprintf(`{"name":"m","source":{"bootstrap_servers":%q}}`, clusters.SourceAddr()))
	c.post("/v1/mirrors/m/topics:add", `{"topic":"bench"}`)
	c.waitAll("MIRRORING", 60*time.Second)
	c.post("/v1/mirrors/m:sync", "") // warm-up: the syncer holds its lease

	var pause, resume, sync []time.Duration
	b.ResetTimer()
	for range actionRounds {
		start := time.Now()
		c.post("/v1/mirrors/m/topics:pause", `{"topic":"bench"}`)
		c.waitAll("PAUSED", effectTimeout)
		pause = append(pause, time.Since(start))

		start = time.Now()
		c.post("/v1/mirrors/m/topics:resume", `{"topic":"bench"}`)
		c.waitAll("MIRRORING", effectTimeout)
		resume = append(resume, time.Since(start))
	}
	for range actionRounds {
		start := time.Now()
		c.post("/v1/mirrors/m:sync", "")
		sync = append(sync, time.Since(start))
	}
	b.StopTimer()

	b.ReportMetric(0, "ns/op") // the whole run, not a per-action figure
	b.Logf("action-to-effect latency, %d actions each (ms):", actionRounds)
	b.Logf("%-7s %8s %8s %8s", "action", "p50", "p99", "max")
	for _, a := range []struct {
		name string
		d    []time.Duration
	}{{"pause", pause}, {"resume", resume}, {"sync", sync}} {
		slices.Sort(a.d)
		p50, p99, maxd := percentile(a.d, 0.50), percentile(a.d, 0.99), a.d[len(a.d)-1]
		b.ReportMetric(ms(p50), a.name+"-p50-ms")
		b.ReportMetric(ms(p99), a.name+"-p99-ms")
		b.ReportMetric(ms(maxd), a.name+"-max-ms")
		b.Logf("%-7s %8.1f %8.1f %8.1f", a.name, ms(p50), ms(p99), ms(maxd))
	}
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchClient calls the API, failing the benchmark on any error.
type benchClient struct {
	b    *testing.B
	base string
	http *http.Client
}

// post sends body as JSON (or nothing) and wants a 2xx answer.
func (c benchClient) post(path, body string) {
	c.b.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(http.MethodPost, c.base+path, r)
	if err != nil {
		c.b.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.b.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		c.b.Fatalf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(out))
	}
}

// waitAll polls GET /v1/partitions every effectPoll until all 3 partitions
// of the topic are in state.
func (c benchClient) waitAll(state string, timeout time.Duration) {
	c.b.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(effectPoll)
	defer tick.Stop()
	var last []string
	for {
		if last = c.states(); len(last) == 3 && !slices.ContainsFunc(last, func(s string) bool { return s != state }) {
			return
		}
		if time.Now().After(deadline) {
			c.b.Fatalf("partitions not all %s after %s: %v", state, timeout, last)
		}
		<-tick.C
	}
}

func (c benchClient) states() []string {
	c.b.Helper()
	resp, err := c.http.Get(c.base + "/v1/partitions?mirror=m&topic=bench")
	if err != nil {
		c.b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		c.b.Fatalf("GET /v1/partitions: %s: %s", resp.Status, bytes.TrimSpace(out))
	}
	var body struct {
		Partitions []struct {
			State string `json:"state"`
		} `json:"partitions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		c.b.Fatal(err)
	}
	out := make([]string, len(body.Partitions))
	for i, p := range body.Partitions {
		out[i] = p.State
	}
	return out
}

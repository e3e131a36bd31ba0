package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/testing/testnet"
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

// shutdownBudget is how long a server told to stop may take, whatever is
// down (at most 5 s), at the default --shutdown-timeout.
const shutdownBudget = 5 * time.Second

// TestShutdownIsBoundedOnABadDay: a SIGTERM under traffic while the
// destination came back empty, while the destination and Postgres are both
// gone, and while Postgres hangs, at the server's default lease and
// delivery timings: each time the server is down within shutdownBudget, with
// an open event stream, a console's, that must not hold it either.
func TestShutdownIsBoundedOnABadDay(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fault runs once the partitions mirror under traffic.
		fault func(t *testing.T, clusters *devcluster.Clusters, db *testnet.Proxy)
	}{
		{"destination back empty", func(t *testing.T, clusters *devcluster.Clusters, _ *testnet.Proxy) {
			if err := clusters.Down("destination"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // copies in flight that no broker will answer
			if err := clusters.UpEmpty("destination"); err != nil {
				t.Fatal(err)
			}
		}},
		{"destination and Postgres gone", func(t *testing.T, clusters *devcluster.Clusters, db *testnet.Proxy) {
			if err := clusters.Down("destination"); err != nil {
				t.Fatal(err)
			}
			db.Cut(testnet.Refuse)
		}},
		{"destination gone and Postgres hanging", func(t *testing.T, clusters *devcluster.Clusters, db *testnet.Proxy) {
			if err := clusters.Down("destination"); err != nil {
				t.Fatal(err)
			}
			db.Cut(testnet.Hang)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var db *testnet.Proxy
			s := startInProcessServer(t, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("case", tc.name), func(cfg *serverConfig) {
				u, err := url.Parse(cfg.DatabaseURL)
				if err != nil {
					t.Fatal(err)
				}
				db = testnet.NewProxy(t, u.Host)
				u.Host = db.Addr()
				cfg.DatabaseURL = u.String()
				// The server's own defaults, not the tests' short ones.
				cfg.LeaseTTL, cfg.LeaseRenewInterval, cfg.DeliveryTimeout = 15*time.Second, 5*time.Second, 4*time.Second
			})
			c := apiClient{tb: t, base: s.base, http: &http.Client{Timeout: 60 * time.Second}}
			c.post("/v1/mirrors", fmt.Sprintf(`{"name":"m","source":{"bootstrap_servers":%q}}`, s.clusters.SourceAddr()))
			c.post("/v1/mirrors/m/topics:add", `{"topic":"bench"}`)
			c.waitAll("MIRRORING", 60*time.Second)
			stopTraffic := benchTraffic(t, s.clusters.SourceAddr())
			defer stopTraffic()
			stream, err := http.Get(s.base + "/v1/events")
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Body.Close()
			time.Sleep(time.Second) // copies in flight
			tc.fault(t, s.clusters, db)
			took := s.stop()
			t.Logf("shut down in %s", took.Round(time.Millisecond))
			if took > shutdownBudget {
				t.Errorf("shutdown took %s, more than %s", took.Round(time.Millisecond), shutdownBudget)
			}
		})
	}
}

// benchTraffic produces to every partition of the source topic bench until
// the returned function is called.
func benchTraffic(t *testing.T, addr string) func() {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			var rs []*kgo.Record
			for p := int32(0); p < 3; p++ {
				rs = append(rs, &kgo.Record{Topic: "bench", Partition: p, Value: []byte(fmt.Sprintf("r%d", i))})
			}
			_ = cl.ProduceSync(ctx, rs...).FirstErr()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() {
		cancel()
		<-done
		cl.Close()
	}
}

// TestShutdownBackstop: a process whose graceful shutdown overruns its
// grace period exits anyway, with status 1; one that finishes in time is
// left alone.
func TestShutdownBackstop(t *testing.T) {
	exits := make(chan int, 2)
	exit := func(code int) { exits <- code }
	ctx, cancel := context.WithCancel(context.Background())
	done := shutdownBackstop(ctx, 50*time.Millisecond, slog.New(slog.DiscardHandler), exit)
	cancel()
	select {
	case code := <-exits:
		if code != 1 {
			t.Fatalf("exit status %d, want 1", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an overrunning shutdown was not ended")
	}
	done()

	ctx, cancel = context.WithCancel(context.Background())
	done = shutdownBackstop(ctx, 200*time.Millisecond, slog.New(slog.DiscardHandler), exit)
	cancel()
	done() // the shutdown finished in time
	select {
	case code := <-exits:
		t.Fatalf("a shutdown that finished in time was ended with status %d", code)
	case <-time.After(400 * time.Millisecond):
	}
}

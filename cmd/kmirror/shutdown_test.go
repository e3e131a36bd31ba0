package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/runtime/startstop"
	"kmirror/internal/testing/syncbuf"
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
	done := shutdownBackstop(ctx, 50*time.Millisecond, slog.New(slog.DiscardHandler), exit, nil)
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
	done = shutdownBackstop(ctx, 200*time.Millisecond, slog.New(slog.DiscardHandler), exit, nil)
	cancel()
	done() // the shutdown finished in time
	select {
	case code := <-exits:
		t.Fatalf("a shutdown that finished in time was ended with status %d", code)
	case <-time.After(400 * time.Millisecond):
	}
}

// TestShutdownStepsNamedAndBounded: a SIGTERM under traffic while the
// network drops everything to the destination and to PostgreSQL (both
// hang, nothing refuses), at the server's default timings. The server is
// down within its budget (4 s, so the 1 s backstop never fires), and every
// step that takes over a second, or is still running when the budget is
// spent, is named in a "slow to stop" line.
func TestShutdownStepsNamedAndBounded(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(io.MultiWriter(&logs, os.Stderr), &slog.HandlerOptions{Level: slog.LevelWarn}))
	behind, destination := testnet.BehindProxy(t)
	clusters, err := devcluster.Start(devcluster.Config{
		SourceOpts:      []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, "bench")},
		DestinationOpts: []kfake.Opt{behind},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clusters.Close)
	var db *testnet.Proxy
	s := startServerOn(t, log, clusters, func(cfg *serverConfig) {
		u, err := url.Parse(cfg.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		db = testnet.NewProxy(t, u.Host)
		u.Host = db.Addr()
		cfg.DatabaseURL = u.String()
		cfg.LeaseTTL, cfg.LeaseRenewInterval, cfg.DeliveryTimeout = 15*time.Second, 5*time.Second, 4*time.Second
	})
	c := apiClient{tb: t, base: s.base, http: &http.Client{Timeout: 60 * time.Second}}
	c.post("/v1/mirrors", fmt.Sprintf(`{"name":"m","source":{"bootstrap_servers":%q}}`, clusters.SourceAddr()))
	c.post("/v1/mirrors/m/topics:add", `{"topic":"bench"}`)
	c.waitAll("MIRRORING", 60*time.Second)
	stopTraffic := benchTraffic(t, clusters.SourceAddr())
	defer stopTraffic()
	time.Sleep(time.Second) // copies in flight
	destination().Cut(testnet.Hang)
	db.Cut(testnet.Hang)
	time.Sleep(500 * time.Millisecond)
	took := s.stop()
	named := slowSteps(logs.String())
	t.Logf("shut down in %s; slow to stop: %v", took.Round(time.Millisecond), named)
	if took > defaultShutdownTimeout+250*time.Millisecond {
		t.Errorf("shutdown took %s, more than its budget %s", took.Round(time.Millisecond), defaultShutdownTimeout)
	}
	if took > 1500*time.Millisecond && len(named) == 0 {
		t.Errorf("shutdown took %s and no step is named slow", took.Round(time.Millisecond))
	}
}

// slowSteps lists the "slow to stop" lines' components and durations.
func slowSteps(log string) []string {
	var out []string
	for l := range strings.Lines(log) {
		var line struct {
			Msg       string        `json:"msg"`
			Component string        `json:"component"`
			Took      time.Duration `json:"took"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && strings.HasPrefix(line.Msg, "slow to stop") {
			out = append(out, fmt.Sprintf("%s %s", line.Component, line.Took.Round(time.Millisecond)))
		}
	}
	return out
}

// stuckStop is a component whose Stop takes d, whatever the budget says.
type stuckStop struct{ d time.Duration }

func (stuckStop) Start(context.Context) error { return nil }
func (s stuckStop) Stop()                     { time.Sleep(s.d) }

// TestStopOverBudgetIsNamedAndLeftBehind: a component whose stop ignores the
// shutdown budget is waited for only while the budget lasts; it is named at
// once in a "slow to stop" line, the steps after it run, and the
// backstop's line names what is still running.
func TestStopOverBudgetIsNamedAndLeftBehind(t *testing.T) {
	var logs syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	budget, st := &startstop.Budget{}, &steps{}
	nm := namer{log: log, budget: budget, steps: st}
	var after atomic.Bool
	pieces := nm.nameAll([]startstop.Service{stuckStop{}, stuckStop{d: 3 * time.Second}}, "the last", "the stuck one")
	if err := startstop.StartAll(t.Context(), pieces...); err != nil {
		t.Fatal(err)
	}
	budget.Begin(500 * time.Millisecond)
	start := time.Now()
	startstop.StopAll(append([]startstop.Service{afterStop{&after}}, pieces...)...)
	took := time.Since(start)
	if took > 500*time.Millisecond+stopGrace+200*time.Millisecond {
		t.Errorf("the stops took %s with a budget of 500ms", took.Round(time.Millisecond))
	}
	if got := slowSteps(logs.String()); len(got) != 1 || !strings.HasPrefix(got[0], "the stuck one ") {
		t.Errorf("slow to stop: %v, want the stuck one", got)
	}
	if !after.Load() {
		t.Error("the steps after the stuck one did not run")
	}
	if got := st.names(); !slices.Equal(got, []string{"stopping the stuck one"}) {
		t.Errorf("still running: %v", got)
	}
}

// afterStop records that it was stopped: StopAll stops in reverse, so it
// stops after the pieces listed behind it.
type afterStop struct{ stopped *atomic.Bool }

func (afterStop) Start(context.Context) error { return nil }
func (a afterStop) Stop()                     { a.stopped.Store(true) }

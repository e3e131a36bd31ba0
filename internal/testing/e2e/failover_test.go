package e2e

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"kmirror/internal/devenv/pgserver"
)

// failoverDelay is how long no primary answers in TestPostgresFailover:
// the time a failover manager takes to notice and promote. The servers run
// with the default lease timings (TTL 15 s, renewed every 5 s), which
// trust a lease for 10 s after its last renewal, so at least 5 s after the
// crash; longer than the TTL, the sessions expire in the database too, and
// only the heartbeats to the destination carry the leases (the default
// outage grace, 60 s).
const failoverDelay = 20 * time.Second

// trustWindow is how long after a crash the leases would be trusted on
// their renewals alone, at the latest.
const trustWindow = 10 * time.Second

// TestPostgresFailover: two kmirror servers mirror under traffic through a
// multi-host database URL (target_session_attrs=read-write) to a primary
// with a synchronous streaming standby. The primary is stopped as a crash
// would (-m immediate), just as the second server takes its share over,
// and the standby promoted: the API answers 503 while
// no primary answers and 200 again by itself, every pool and the LISTEN
// connection find the new primary, copying goes on through the gap, no
// lease is lost, and the copy ends exact with no partition failed. The
// outage outlasts the leases' TTL: copying goes on past the trust window,
// on heartbeats, and the sessions are renewed in place afterwards.
func TestPostgresFailover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFailoverWorld(t)
	events := followEvents(t, f.apiA)
	// The crash comes as b takes its share over from a: the takeovers'
	// re-alignments lose the database half-way.
	f.startB()
	f.b.waitEvent("a partition lease", f.b.logs.leased, 30*time.Second, func() string { return describeRows(f.w.rows()) })
	w, primary, standby, apiA, apiB := f.w, f.primary, f.standby, f.apiA, f.apiB
	a, b := f.a, f.b
	copied := f.copied
	atCrash := copied()
	crashed := time.Now()
	if err := primary.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the API to answer 503 with no primary", func() bool {
		return status(apiA, "/v1/mirrors") == http.StatusServiceUnavailable
	})
	time.Sleep(time.Until(crashed.Add(trustWindow + time.Second)))
	pastTrust := copied()
	time.Sleep(time.Until(crashed.Add(failoverDelay))) // the rest of the outage
	atPromote := copied()
	if atPromote <= pastTrust {
		t.Errorf("copying stopped once the leases' renewals ran out: %d records copied at %s into the outage, %d at the promotion",
			pastTrust, trustWindow+time.Second, atPromote)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	for _, api := range []string{apiA, apiB} {
		waitUntil(t, 30*time.Second, "the API to answer 200 from the new primary", func() bool {
			return status(api, "/v1/mirrors") == http.StatusOK && status(api, "/readyz") == http.StatusOK
		})
	}
	recovered := time.Since(promoted)
	waitUntil(t, 30*time.Second, "copying past where it stood at the promotion", func() bool {
		return copied() > atPromote+100
	})
	t.Logf("primary crashed, standby promoted %s later; the APIs answered 200 %s after the promotion; "+
		"records copied while no primary answered: %d (%d after the trust window); copying again %s after the promotion",
		failoverDelay, recovered.Round(time.Millisecond), atPromote-atCrash, atPromote-pastTrust, time.Since(promoted).Round(time.Millisecond))
	// The event stream opened before the crash goes on, and a wait
	// answers from the new primary.
	ctx30, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var paused struct {
		Wait struct {
			Completed bool `json:"completed"`
		} `json:"wait"`
	}
	if err := apiCall(ctx30, apiA, http.MethodPost, "/v1/mirrors/"+w.mirror+"/topics:pause?wait=30s",
		map[string]any{"topic": crashTopic}, &paused, http.StatusOK); err != nil {
		t.Fatal(err)
	}
	if !paused.Wait.Completed {
		t.Fatalf("the pause's wait did not complete: %+v", paused)
	}
	waitUntil(t, 10*time.Second, "the pause on the event stream opened before the crash", func() bool {
		return events.saw("paused")
	})
	if err := apiCall(ctx30, apiA, http.MethodPost, "/v1/mirrors/"+w.mirror+"/topics:resume?wait=30s",
		map[string]any{"topic": crashTopic}, nil, http.StatusOK); err != nil {
		t.Fatal(err)
	}
	a.alive()
	b.alive()
	for _, s := range []*serverProcess{a, b} {
		if n := s.logs.count("lease lost"); n > 0 {
			t.Errorf("server %s lost %d lease(s) in a failover of %s", s.id, n, failoverDelay)
		}
	}
	w.finish(f.prod, func() string { return apiA }, 0, map[string]int{}, time.Since(crashed))
}

// failoverWorld is a world on a primary with a synchronous streaming
// standby, and a server at the default lease timings mirroring the crash
// topic under traffic through a multi-host URL; b is the second server,
// started by the test (startB).
type failoverWorld struct {
	w                *world
	primary, standby *pgserver.Server
	prod             *producer
	a, b             *serverProcess
	apiA, apiB       string
}

func newFailoverWorld(t testing.TB) *failoverWorld {
	t.Helper()
	ctx := context.Background()
	primary, err := pgserver.Start(ctx, pgserver.Config{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Stop() })
	c, err := pgx.Connect(ctx, primary.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err = c.Exec(ctx, "CREATE DATABASE kmirror"); err != nil {
		t.Fatal(err)
	}
	standby, err := primary.StartStandby(ctx, pgserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Stop() })
	// Synchronous from here, as Patroni's synchronous mode or RDS
	// Multi-AZ: a commit the primary acknowledged is on the standby.
	if _, err = c.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '*'"); err != nil {
		t.Fatal(err)
	}
	if _, err = c.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "a synchronous standby", func() bool {
		var n int
		err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'").Scan(&n)
		return err == nil && n == 1
	})
	dbURL := fmt.Sprintf("postgres://postgres@%s,%s/kmirror?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Addr(), standby.Addr())

	f := &failoverWorld{w: newWorldOn(t, crashTopic, crashPartitions, dbURL), primary: primary, standby: standby}
	w := f.w
	w.args = []string{"--lease-ttl", "15s", "--lease-renew-interval", "5s"}
	kmirrorBinary(t) // built before the producer starts
	f.prod = startProducer(t, w.clusters.SourceAddr(), crashTopic, crashPartitions, produceTick, producePerTick)
	f.a, f.apiA = w.start("a")
	w.createMirror(f.apiA)
	waitUntil(t, 60*time.Second, "server a mirroring every partition", func() bool {
		owners := map[string]int{}
		for _, r := range w.rows() {
			if r.state == "MIRRORING" {
				owners[r.owner]++
			}
		}
		return owners["a"] == crashPartitions
	})
	waitUntil(t, 30*time.Second, "copying on every partition", func() bool {
		ends, _ := listEnds(w.clusters.DestinationAddr(), crashTopic, false)
		for p := range int32(crashPartitions) {
			if ends[p] < 20 {
				return false
			}
		}
		return true
	})
	return f
}

// startB starts the second server.
func (f *failoverWorld) startB() {
	f.b, f.apiB = f.w.start("b")
}

// shared waits until a and b mirror two partitions each.
func (f *failoverWorld) shared(t testing.TB) {
	t.Helper()
	waitUntil(t, 60*time.Second, "both servers mirroring their share", func() bool {
		owners := map[string]int{}
		for _, r := range f.w.rows() {
			if r.state == "MIRRORING" {
				owners[r.owner]++
			}
		}
		return owners["a"] == crashPartitions/2 && owners["b"] == crashPartitions/2
	})
}

// copied is the destination's records, 0 before its topic exists.
func (f *failoverWorld) copied() int64 {
	ends, _ := listEnds(f.w.clusters.DestinationAddr(), crashTopic, false)
	var n int64
	for _, end := range ends {
		n += end
	}
	return n
}

// eventLog is what an event stream has sent.
type eventLog struct {
	mu    sync.Mutex
	names []string
	ended error
}

// followEvents reads GET /v1/events until the test ends; it fails the
// test if the stream ends first.
func followEvents(t testing.TB, api string) *eventLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events: %v %v", err, resp)
	}
	l := &eventLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				l.mu.Lock()
				l.names = append(l.names, name)
				l.mu.Unlock()
			}
		}
		l.mu.Lock()
		l.ended = cmp.Or(sc.Err(), io.EOF)
		l.mu.Unlock()
	}()
	t.Cleanup(func() {
		l.mu.Lock()
		ended := l.ended
		l.mu.Unlock()
		cancel()
		resp.Body.Close()
		<-done
		if ended != nil {
			t.Errorf("the event stream ended before the test did: %v", ended)
		}
	})
	return l
}

// saw says whether an event whose kind contains s was sent.
func (l *eventLog) saw(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.names, func(n string) bool { return strings.Contains(n, s) })
}

// waitUntil polls cond every 50 ms until it holds, or fails the test after
// timeout.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// status is the HTTP status of a GET, 0 when there is no answer.
func status(api, path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+path, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

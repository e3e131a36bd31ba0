package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kmirror/internal/syncbuf"
)

// blackhole accepts TCP connections and never answers: a source cluster
// that times out.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestSlowSourceRequestsDoNotStallMirroring: 20 concurrent PATCHes that
// point a mirror at a source that times out, and 500 concurrent describe
// reads, while mirroring. The PATCHes wait on the source side by side (no
// row lock or pooled connection is held meanwhile), and the data plane, on
// pools of its own, loses no lease and no partition leaves MIRRORING.
func TestSlowSourceRequestsDoNotStallMirroring(t *testing.T) {
	logs := &syncbuf.Buffer{}
	base, clusters := startInProcess(t, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	c := apiClient{tb: t, base: base, http: &http.Client{Timeout: 60 * time.Second}}
	c.post("/v1/mirrors", fmt.Sprintf(`{"name":"m","source":{"bootstrap_servers":%q}}`, clusters.SourceAddr()))
	c.post("/v1/mirrors/m/topics:add", `{"topic":"bench"}`)
	c.waitAll("MIRRORING", 60*time.Second)
	slow := blackhole(t)
	before := len(logs.String()) // what is logged from here on counts

	var wg sync.WaitGroup
	var mu sync.Mutex
	var patchTimes, readTimes []time.Duration
	var bad []string
	start := time.Now()
	for range 20 {
		wg.Go(func() {
			t0 := time.Now()
			status, body := c.do("PATCH", "/v1/mirrors/m", fmt.Sprintf(`{"source":{"bootstrap_servers":%q}}`, slow))
			mu.Lock()
			defer mu.Unlock()
			patchTimes = append(patchTimes, time.Since(t0))
			if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "source-unavailable") {
				bad = append(bad, fmt.Sprintf("PATCH: %d %s", status, body))
			}
		})
	}
	for range 50 {
		wg.Go(func() {
			for range 10 {
				t0 := time.Now()
				status, body := c.do("GET", "/v1/partitions?mirror=m", "")
				mu.Lock()
				readTimes = append(readTimes, time.Since(t0))
				if status != http.StatusOK {
					bad = append(bad, fmt.Sprintf("GET: %d %s", status, body))
				} else if n := strings.Count(string(body), `"MIRRORING"`); n != 3 {
					bad = append(bad, fmt.Sprintf("describe shows %d of 3 partitions MIRRORING: %s", n, body))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	for _, b := range bad {
		t.Error(b)
	}
	slices.Sort(patchTimes)
	slices.Sort(readTimes)
	// Side by side, not one after another: 20 × the 2s source timeout
	// would be 40s.
	if last := patchTimes[len(patchTimes)-1]; last > 15*time.Second {
		t.Errorf("the slowest PATCH took %s: the PATCHes waited on each other", last)
	}
	during := logs.String()[before:]
	if n := strings.Count(during, `"msg":"lease lost"`); n > 0 {
		t.Errorf("%d lease(s) lost while the API was busy", n)
	}
	// A partition leaving MIRRORING (the log line of the last step into it
	// may land after the wait above, so only departures count).
	left := 0
	for _, line := range strings.Split(during, "\n") {
		if strings.Contains(line, `"msg":"partition state"`) && strings.Contains(line, `"from":"MIRRORING"`) {
			left++
		}
	}
	if left > 0 {
		t.Errorf("%d partition(s) left MIRRORING while the API was busy", left)
	}
	c.waitAll("MIRRORING", time.Second)
	t.Logf("20 slow PATCHes and 500 reads in %s; PATCH p50 %s max %s; describe p50 %s p99 %s",
		took.Round(time.Millisecond), percentile(patchTimes, 0.5).Round(time.Millisecond),
		patchTimes[len(patchTimes)-1].Round(time.Millisecond),
		percentile(readTimes, 0.5).Round(time.Millisecond), percentile(readTimes, 0.99).Round(time.Millisecond))
}

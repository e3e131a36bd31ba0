package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kmirror/internal/testing/syncbuf"
	"kmirror/internal/testing/testnet"
)

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
	slow := testnet.NewBlackhole(t).Addr()
	before := len(logs.String()) // what is logged from here on counts

	start := time.Now()
	patchTimes, readTimes, bad := slowPatchLoad(c, slow, 20, 500)
	took := time.Since(start)
	for _, b := range bad {
		t.Error(b)
	}
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

// slowPatchLoad sends, all at once, patches PATCHes pointing mirror m at the
// source slow (which never answers) and reads describe calls (50 readers),
// and returns the sorted latencies of each kind and any unexpected answer.
func slowPatchLoad(c apiClient, slow string, patches, reads int) (patchTimes, readTimes []time.Duration, bad []string) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range patches {
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
	describeLoad(c, reads, &mu, &readTimes, &bad, &wg)
	wg.Wait()
	slices.Sort(patchTimes)
	slices.Sort(readTimes)
	return patchTimes, readTimes, bad
}

// describeLoad starts 50 readers that make reads describe calls between
// them, each checking that all 3 partitions read MIRRORING.
func describeLoad(c apiClient, reads int, mu *sync.Mutex, readTimes *[]time.Duration, bad *[]string, wg *sync.WaitGroup) {
	const readers = 50
	for r := range readers {
		n := reads / readers
		if r < reads%readers {
			n++
		}
		wg.Go(func() {
			for range n {
				t0 := time.Now()
				status, body := c.do("GET", "/v1/partitions?mirror=m", "")
				mu.Lock()
				*readTimes = append(*readTimes, time.Since(t0))
				if status != http.StatusOK {
					*bad = append(*bad, fmt.Sprintf("GET: %d %s", status, body))
				} else if k := strings.Count(string(body), `"MIRRORING"`); k != 3 {
					*bad = append(*bad, fmt.Sprintf("describe shows %d of 3 partitions MIRRORING: %s", k, body))
				}
				mu.Unlock()
			}
		})
	}
}

// BenchmarkDescribeUnderSlowPatches measures describe latency while 20
// PATCHes wait on a source that never answers, against describe latency
// with no PATCH in flight, measured in the same run (500 reads by 50
// readers each time; a full in-process server, 3 MIRRORING partitions).
//
//	go test ./cmd/kmirror -run '^$' -bench DescribeUnderSlowPatches -benchtime=1x
func BenchmarkDescribeUnderSlowPatches(b *testing.B) {
	base, clusters := startInProcess(b, slog.New(slog.DiscardHandler))
	c := apiClient{tb: b, base: base, http: &http.Client{Timeout: 60 * time.Second}}
	c.post("/v1/mirrors", fmt.Sprintf(`{"name":"m","source":{"bootstrap_servers":%q}}`, clusters.SourceAddr()))
	c.post("/v1/mirrors/m/topics:add", `{"topic":"bench"}`)
	c.waitAll("MIRRORING", 60*time.Second)
	slow := testnet.NewBlackhole(b).Addr()
	b.ResetTimer()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var quiet []time.Duration
	var bad []string
	describeLoad(c, 500, &mu, &quiet, &bad, &wg)
	wg.Wait()
	slices.Sort(quiet)
	patchTimes, busy, bad2 := slowPatchLoad(c, slow, 20, 500)
	b.StopTimer()
	for _, m := range append(bad, bad2...) {
		b.Error(m)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(percentile(quiet, 0.99)), "quiet-describe-p99-ms")
	b.ReportMetric(ms(percentile(busy, 0.50)), "busy-describe-p50-ms")
	b.ReportMetric(ms(percentile(busy, 0.99)), "busy-describe-p99-ms")
	b.ReportMetric(ms(patchTimes[len(patchTimes)-1]), "patch-max-ms")
	b.Logf("describe p50/p99: %.1f/%.1f ms quiet, %.1f/%.1f ms with 20 slow PATCHes (slowest PATCH %.0f ms)",
		ms(percentile(quiet, 0.5)), ms(percentile(quiet, 0.99)), ms(percentile(busy, 0.5)), ms(percentile(busy, 0.99)),
		ms(patchTimes[len(patchTimes)-1]))
}

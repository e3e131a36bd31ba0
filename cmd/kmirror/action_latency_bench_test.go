package main

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"
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
	base, clusters := startInProcess(b, slog.New(slog.DiscardHandler))
	c := apiClient{tb: b, base: base, http: &http.Client{Timeout: 60 * time.Second}}
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

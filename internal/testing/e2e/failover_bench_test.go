package e2e

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkPostgresOutage measures the data plane through a failover: the
// primary crashes and the standby is promoted after each outage of
// KMIRROR_BENCH_OUTAGES (Go durations, comma-separated; default
// 3s,20s,60s), with two servers at the default lease timings mirroring 400
// records/s (the failover world of TestPostgresFailover). It reports the
// share of the records produced in the outage that were copied before the
// promotion (gap-copied), the longest time the destination did not move
// from the crash on (stall-s), how long after the promotion copying moved
// again (resumed-s, 0 when it never stopped) and the APIs answered
// (api-s), and the leases lost. The copy is checked exact at the end.
func BenchmarkPostgresOutage(b *testing.B) {
	raw := os.Getenv("KMIRROR_BENCH_OUTAGES")
	if raw == "" {
		raw = "3s,20s,60s"
	}
	for _, s := range strings.Split(raw, ",") {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("KMIRROR_BENCH_OUTAGES: %v", err)
		}
		b.Run(d.String(), func(b *testing.B) {
			for range b.N {
				runOutage(b, d)
			}
		})
	}
}

func runOutage(b *testing.B, outage time.Duration) {
	f := newFailoverWorld(b)
	f.startB()
	f.shared(b)
	ctx := context.Background()
	var mu sync.Mutex
	var moves []time.Time // when the destination was seen to have moved
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		last := f.copied()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond): // the sampling interval
			}
			if n := f.copied(); n > last {
				mu.Lock()
				moves = append(moves, time.Now())
				mu.Unlock()
				last = n
			}
		}
	}()
	sentAtCrash, copiedAtCrash := f.prod.count(), f.copied()
	crashed := time.Now()
	if err := f.primary.Crash(ctx); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Until(crashed.Add(outage))) // the outage itself
	sentAtPromote, copiedAtPromote := f.prod.count(), f.copied()
	if err := f.standby.Promote(ctx); err != nil {
		b.Fatal(err)
	}
	promoted := time.Now()
	for _, api := range []string{f.apiA, f.apiB} {
		waitUntil(b, 60*time.Second, "the API to answer 200 from the new primary", func() bool {
			return status(api, "/v1/mirrors") == http.StatusOK
		})
	}
	apiBack := time.Since(promoted)
	waitUntil(b, 60*time.Second, "copying after the promotion", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(moves) > 0 && moves[len(moves)-1].After(promoted)
	})
	time.Sleep(5 * time.Second) // steady again, for the stall figures
	close(stop)
	<-sampled

	stall, resumed := time.Duration(0), time.Duration(0)
	prev := crashed
	for _, m := range moves {
		if m.Before(crashed) {
			continue
		}
		if gap := m.Sub(prev); gap > stall {
			stall = gap
		}
		if prev.Before(promoted) && !m.Before(promoted) && m.Sub(prev) > time.Second {
			resumed = m.Sub(promoted)
		}
		prev = m
	}
	lost := 0
	for _, s := range []*serverProcess{f.a, f.b} {
		lost += s.logs.count("lease lost")
	}
	share := float64(copiedAtPromote-copiedAtCrash) / float64(max(sentAtPromote-sentAtCrash, 1))
	b.ReportMetric(share, "gap-copied")
	b.ReportMetric(stall.Seconds(), "stall-s")
	b.ReportMetric(resumed.Seconds(), "resumed-s")
	b.ReportMetric(apiBack.Seconds(), "api-s")
	b.ReportMetric(float64(lost), "leases-lost")
	b.Logf("outage %s: %.0f%% of the records produced in it copied before the promotion; longest stall %s; "+
		"copying again %s after the promotion; APIs back %s after it; %d lease(s) lost",
		outage, 100*share, stall.Round(100*time.Millisecond), resumed.Round(100*time.Millisecond),
		apiBack.Round(10*time.Millisecond), lost)
	f.a.alive()
	f.b.alive()
	f.w.finish(f.prod, func() string { return f.apiA }, 0, map[string]int{}, time.Since(crashed))
}

package schemaregistry

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"kmirror/internal/devenv/devregistry"
)

// countingTransport counts the HTTP requests a client sends.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// BenchmarkSyncPass measures one mirror's schema pass over
// KMIRROR_BENCH_TOPICS topics (default 200), each with a value subject of 3
// versions: the first pass, which copies everything, and a pass with
// nothing to copy, which is what every schema.sync.interval.ms costs once
// the registries are in step. It reports the HTTP requests to each
// registry per pass and the pass's wall time, both registries in memory on
// loopback (a real registry's round trips add their latency per request).
//
//	go test ./internal/kafka/schemaregistry -run '^$' -bench SyncPass -benchtime=3x
func BenchmarkSyncPass(b *testing.B) {
	topics := 200
	if v, err := strconv.Atoi(os.Getenv("KMIRROR_BENCH_TOPICS")); err == nil && v > 0 {
		topics = v
	}
	src := srfake.New()
	b.Cleanup(src.Close)
	id := 1
	var names []string
	for i := range topics {
		name := fmt.Sprintf("t%04d", i)
		names = append(names, name)
		for v := 1; v <= 3; v++ {
			src.SeedSchema(name+"-value", v, id, sr.Schema{Type: sr.TypeAvro,
				Schema: fmt.Sprintf(`{"type":"record","name":"R%d","fields":[{"name":"f%d","type":"string"}]}`, id, v)})
			id++
		}
	}
	srcCount, dstCount := &countingTransport{}, &countingTransport{}
	client := func(url string, t http.RoundTripper) *sr.Client {
		cl, err := sr.NewClient(sr.URLs(url), sr.HTTPClient(&http.Client{Transport: t, Timeout: 10 * time.Second}))
		if err != nil {
			b.Fatal(err)
		}
		return cl
	}
	sel := Selection{Topics: names}
	ctx := context.Background()
	var firstReq, firstMs, steadySrc, steadyDst, steadyMs float64
	for range b.N {
		dst, err := devregistry.New()
		if err != nil {
			b.Fatal(err)
		}
		srcCl, dstCl := client(src.URL(), srcCount), client(dst.URL(), dstCount)
		srcCount.n.Store(0)
		dstCount.n.Store(0)
		start := time.Now()
		rep, err := Sync(ctx, srcCl, dstCl, sel)
		if err != nil || rep.Err() != nil || rep.Copied != 3*topics {
			b.Fatalf("first pass: %v %v, copied %d", err, rep.Err(), rep.Copied)
		}
		firstMs += float64(time.Since(start).Milliseconds())
		firstReq += float64(srcCount.n.Load() + dstCount.n.Load())
		srcCount.n.Store(0)
		dstCount.n.Store(0)
		start = time.Now()
		rep, err = Sync(ctx, srcCl, dstCl, sel)
		if err != nil || rep.Err() != nil || rep.Changed() {
			b.Fatalf("steady pass: %v %v, changed %t", err, rep.Err(), rep.Changed())
		}
		steadyMs += float64(time.Since(start).Milliseconds())
		steadySrc += float64(srcCount.n.Load())
		steadyDst += float64(dstCount.n.Load())
		dst.Close()
	}
	n := float64(b.N)
	b.ReportMetric(float64(topics), "subjects")
	b.ReportMetric(firstReq/n, "first-pass-requests")
	b.ReportMetric(firstMs/n, "first-pass-ms")
	b.ReportMetric(steadySrc/n, "steady-source-requests")
	b.ReportMetric(steadyDst/n, "steady-destination-requests")
	b.ReportMetric(steadyMs/n, "steady-pass-ms")
}

package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The describe budget's defaults: a 10,000-partition listing at once, then
// two a second, a small share of a two-core machine's CPU for the pages'
// queries and JSON.
const (
	DefaultDescribeRate  = 20_000
	DefaultDescribeBurst = 10_000
)

// describeBudget paces GET /v1/partitions for the whole instance: a page
// waits until there is budget for the rows it asks for. Building a page is
// CPU (the query on Postgres, then JSON) on the machine that mirrors, and
// clients paging without pause would take a large share of the copy's
// throughput there.
// The budget is a token bucket of rows that callers reserve in turn, so
// pages are served in arrival order; rows a page did not use (a filter
// matched fewer) are given back.
type describeBudget struct {
	rate   float64 // rows per second
	burst  float64 // rows at once; at least the largest page
	now    func() time.Time
	waited prometheus.Counter

	mu     sync.Mutex
	bucket // rows; negative where reserved ahead of the refill
}

func newDescribeBudget(rate float64, burst int, waited prometheus.Counter) *describeBudget {
	b := &describeBudget{rate: rate, burst: float64(burst), now: time.Now, waited: waited}
	b.bucket = bucket{tokens: b.burst, at: b.now()}
	return b
}

// errBudget says a page could not be served before its request's deadline.
type errBudget struct{ retryAfter time.Duration }

func (e errBudget) Error() string {
	return fmt.Sprintf("describe budget exhausted: the instance serves at most its --api-describe-rate of rows per second; retry after %s",
		e.retryAfter.Round(time.Second))
}

// reserve takes n rows now and returns how long to wait before using them.
func (b *describeBudget) reserve(n int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(b.now(), b.rate, b.burst)
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// refund gives back n rows reserved but not used.
func (b *describeBudget) refund(n int) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.burst, b.tokens+float64(n))
}

// acquire waits for n rows of budget; done gives back what the page did not
// use. When the wait would outlast ctx's deadline it returns errBudget at
// once, and when ctx ends first its error; nothing is kept either way.
func (b *describeBudget) acquire(ctx context.Context, n int) (done func(used int), err error) {
	d := b.reserve(n)
	done = func(used int) { b.refund(n - used) }
	if d <= 0 {
		return done, nil
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		b.refund(n)
		return nil, errBudget{retryAfter: d}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		b.waited.Add(d.Seconds())
		return done, nil
	case <-ctx.Done():
		b.refund(n)
		return nil, ctx.Err()
	}
}

// writeBudgetError answers a page that could not wait for the budget: 429
// with Retry-After when its deadline was too near, else the context's end.
func writeBudgetError(w http.ResponseWriter, r *http.Request, err error) {
	var eb errBudget
	if !errors.As(err, &eb) {
		writeError(w, r, err)
		return
	}
	secs := max(int(math.Ceil(eb.retryAfter.Seconds())), 1)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeProblem(w, r, kindRateLimited, eb.Error(), nil)
}

package api

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// rateLimiter is a token bucket per caller: burst changes at once, then
// rate per second. A caller is its token's name, or its address when the
// server has no tokens.
type rateLimiter struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

// bucket is a token bucket's state; tokens may be negative where rows are
// reserved ahead of the refill (describeBudget).
type bucket struct {
	tokens float64
	at     time.Time
}

// refill adds what rate earned since the last refill, up to burst.
func (b *bucket) refill(now time.Time, rate, burst float64) {
	b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
}

// maxBuckets bounds the limiter's memory: past it, buckets that have
// refilled (callers that went quiet) are dropped.
const maxBuckets = 10_000

func newRateLimiter(rate float64, burst int) *rateLimiter {
	return &rateLimiter{rate: rate, burst: float64(max(burst, 1)), now: time.Now, buckets: map[string]*bucket{}}
}

// take spends one token of key's bucket, or says how long until one is
// available.
func (l *rateLimiter) take(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			l.sweep(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	b.refill(now, l.rate, l.burst)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

func (l *rateLimiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
}

// streamLimiter caps the event streams a caller holds open at once.
type streamLimiter struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (l *streamLimiter) acquire(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] >= l.max {
		return false
	}
	l.open[key]++
	return true
}

func (l *streamLimiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// callerKey names the caller for the limits: its token's name, or its
// address when the server has no tokens.
func callerKey(r *http.Request) string {
	if c, ok := r.Context().Value(callerKeyCtx).(caller); ok && c.token {
		return "token:" + c.name
	}
	return "addr:" + remoteHost(r)
}

// limitChanges answers 429 with Retry-After to a caller that makes changes
// faster than the limiter allows; reads are not limited.
func limitChanges(l *rateLimiter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if l == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				next.ServeHTTP(w, r)
				return
			}
			if ok, wait := l.take(callerKey(r)); !ok {
				secs := int(math.Ceil(wait.Seconds()))
				w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
				writeProblem(w, r, kindRateLimited, "too many changes from this caller: at most "+
					strconv.FormatFloat(l.rate, 'g', -1, 64)+" per second (bursts of "+
					strconv.Itoa(int(l.burst))+"); retry after "+strconv.Itoa(max(secs, 1))+"s", nil)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// limitStreams answers 429 to a caller that already holds the most event
// streams it may.
func limitStreams(l *streamLimiter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if l == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := callerKey(r)
			if !l.acquire(key) {
				w.Header().Set("Retry-After", "15")
				writeProblem(w, r, kindRateLimited, "this caller already has "+strconv.Itoa(l.max)+
					" event streams open, the most it may; close one first", nil)
				return
			}
			defer l.release(key)
			next.ServeHTTP(w, r)
		})
	}
}

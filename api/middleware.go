package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"kmirror/service"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	loggerKey
	roleKey
)

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

func logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// withRequestID takes a well-formed X-Request-Id from the client or makes
// one, echoes it, and puts it and a logger carrying it in the context.
func withRequestID(base *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("X-Request-Id")
			if !requestIDRE.MatchString(id) {
				var b [8]byte
				_, _ = rand.Read(b[:])
				id = hex.EncodeToString(b[:])
			}
			w.Header().Set("X-Request-Id", id)
			ctx := context.WithValue(r.Context(), requestIDKey, id)
			ctx = context.WithValue(ctx, loggerKey, base.With("request_id", id))
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// httpMetrics counts requests and their durations by route pattern, which
// is bounded, never by raw path.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kmirror_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// logAndMeasure logs each request with slog and records its metrics.
func (m *httpMetrics) logAndMeasure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		elapsed := time.Since(start)
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(status)).Inc()
		m.duration.WithLabelValues(route, r.Method).Observe(elapsed.Seconds())
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		logger(r.Context()).Log(r.Context(), level, "http request", "method", r.Method,
			"path", r.URL.Path, "route", route, "status", status, "bytes", ww.BytesWritten(),
			"duration_ms", elapsed.Milliseconds())
	})
}

// recoverer turns a panic into a logged 500 problem.
func recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				logger(r.Context()).ErrorContext(r.Context(), "panic in handler", "panic", v)
				writeProblem(w, r, kindInternal, "internal error; see the server log for request "+requestID(r.Context()), nil)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// requestDeadline bounds a request, except the event stream, which is meant
// to stay open: a database or source that hangs then answers 503 within
// the deadline instead of holding the client and a pooled connection.
func requestDeadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/events") {
				next.ServeHTTP(w, r)
				return
			}
			d := d
			if raw := r.URL.Query().Get("wait"); raw != "" {
				// A topic action's wait is on top of the deadline (a bad
				// wait is refused by the handler).
				if wait, err := service.ParseWait("wait", raw); err == nil {
					d += wait
				}
			}
			ctx, cancel := context.WithTimeoutCause(r.Context(), d,
				fmt.Errorf("request timed out after %s", d))
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

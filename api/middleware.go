package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
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
	callerKeyCtx
	infoKey
)

// requestInfo is what inner handlers learn about a request that its log
// line, written by the outer middleware, reports.
type requestInfo struct {
	actor string
	// problem is the type of the problem answered, "" for none.
	problem ProblemType
}

func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(infoKey).(*requestInfo)
	return info
}

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
			ctx = context.WithValue(ctx, infoKey, &requestInfo{})
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// rejectBadText answers 400 for a path or query that holds a NUL byte or
// invalid UTF-8 (as /v1/mirrors/a%00b): PostgreSQL cannot store or compare
// such text, and would fail the request with a 500 (SQLSTATE 22021).
func rejectBadText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bad := hasBadText(r.URL.Path)
		for k, vs := range r.URL.Query() {
			bad = bad || hasBadText(k)
			for _, v := range vs {
				bad = bad || hasBadText(v)
			}
		}
		if bad {
			writeProblem(w, r, kindValidation, "the path or query holds a NUL character or invalid UTF-8", nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// httpMetrics counts requests and their durations by route pattern and
// method. Every label takes its values from a fixed set: a made-up method
// or an unknown route is "other", so no client can add series (labelled as
// sent, requests with invented methods would grow /metrics without bound).
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// routes are the router's patterns, filled once the routes exist.
	routes map[string]bool
}

// metricMethods are the methods that get their own label value.
var metricMethods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPost: true,
	http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true}

func (m *httpMetrics) labels(route, method string, status int) (string, string, string) {
	if !m.routes[route] {
		route = "other"
	}
	if !metricMethods[method] {
		method = "other"
	}
	code := "other"
	if status >= 100 && status <= 599 {
		code = strconv.Itoa(status)
	}
	return route, method, code
}

// learnRoutes records the router's patterns as the route label's values.
func (m *httpMetrics) learnRoutes(r chi.Routes) error {
	m.routes = map[string]bool{}
	return chi.Walk(r, func(_ string, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		m.routes[route] = true
		return nil
	})
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
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		elapsed := time.Since(start)
		routeLabel, methodLabel, statusLabel := m.labels(route, r.Method, status)
		m.requests.WithLabelValues(routeLabel, methodLabel, statusLabel).Inc()
		m.duration.WithLabelValues(routeLabel, methodLabel).Observe(elapsed.Seconds())
		var problem ProblemType
		info := infoOf(r.Context())
		if info != nil {
			problem = info.problem
		}
		// The audit trail's log side: who (once authenticated), from where.
		attrs := []any{"method", r.Method, "path", r.URL.Path, "route", route, "status", status,
			"bytes", ww.BytesWritten(), "duration_ms", elapsed.Milliseconds(), "remote_addr", remoteHost(r)}
		if info != nil && info.actor != "" {
			attrs = append(attrs, "actor", info.actor)
		}
		level := accessLogLevel(status, problem)
		logger(r.Context()).Log(r.Context(), level, "http request", attrs...)
	})
}

// accessLogLevel is the level of a request's log line: ERROR for a server
// error, but WARN for a source cluster that does not answer. That 503
// names the source the caller gave or acts on: the caller's to fix or wait
// out, and the answer already says so, while ERROR is what operators alert
// on.
func accessLogLevel(status int, problem ProblemType) slog.Level {
	switch {
	case status < 500:
		return slog.LevelInfo
	case problem == ProblemTypeSourceUnavailable:
		return slog.LevelWarn
	}
	return slog.LevelError
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
// the deadline instead of holding the client and a pooled connection. The
// connection's read and write deadlines (the server's ReadTimeout and
// WriteTimeout) become the request's own, so a long ?wait is not cut off;
// the read deadline only once the body is read, so a trickled body still
// meets the server's.
func requestDeadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isEventStream(r) {
				// streamEvents bounds each of its writes instead.
				connDeadlines(w, r, time.Time{})
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
			// The grace lets the handler write its 503 after the deadline.
			connDeadlines(w, r, time.Now().Add(d+5*time.Second))
			ctx, cancel := context.WithTimeoutCause(r.Context(), d,
				fmt.Errorf("request timed out after %s", d))
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

func isEventStream(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/events") }

// connDeadlines sets the connection's write deadline to t now, and its read
// deadline once the request body has been read to its end (a zero t: none).
// net/http cancels a request's context when the read deadline passes, even
// after the body was read.
func connDeadlines(w http.ResponseWriter, r *http.Request, t time.Time) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(t)
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		_ = rc.SetReadDeadline(t)
		return
	}
	r.Body = &onEOF{ReadCloser: r.Body, f: func() { _ = rc.SetReadDeadline(t) }}
}

// onEOF calls f once, when the body has been read to its end.
type onEOF struct {
	io.ReadCloser
	f    func()
	done bool
}

func (b *onEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.f()
	}
	return n, err
}

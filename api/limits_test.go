package api_test

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"kmirror/api"
)

// TestMetricLabelsAreBounded: invented methods and paths, unauthenticated,
// add no series to /metrics; each label takes values from a fixed set.
// Labelled as sent, every made-up method would be a label value of its own
// (2,000 requests grow /metrics from 41 KB to 126 MB).
func TestMetricLabelsAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{tokens: api.Tokens{Admin: "admin-secret"}, public: true})
	scrape := func() string {
		r := e.do(t, "GET", "/metrics", nil)
		if r.status != 200 {
			t.Fatalf("/metrics: %s", r)
		}
		return string(r.body)
	}
	e.do(t, "GET", "/v1/mirrors", nil, "Authorization", "Bearer admin-secret")
	for i := range 500 {
		e.do(t, fmt.Sprintf("M%dX", i), fmt.Sprintf("/v1/nope-%d/%d", i, i), nil)
		e.do(t, "GET", fmt.Sprintf("/random/%d", i), nil)
	}
	scrape() // the scrape's own series
	before := len(scrape())
	for i := 500; i < 1500; i++ {
		e.do(t, fmt.Sprintf("M%dX", i), fmt.Sprintf("/v1/nope-%d/%d", i, i), nil)
	}
	body := scrape()
	// A second scrape after 1,000 more invented requests differs only in
	// the counts' digits.
	if len(body) > before+200 {
		t.Fatalf("/metrics grew from %d to %d bytes after 1,000 requests with invented methods", before, len(body))
	}
	methods := regexp.MustCompile(`kmirror_http_requests_total\{method="([^"]*)",route="([^"]*)",status="([^"]*)"\}`)
	seen := map[string]bool{}
	for _, m := range methods.FindAllStringSubmatch(body, -1) {
		seen["method="+m[1]], seen["route="+m[2]] = true, true
		switch m[1] {
		case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other":
		default:
			t.Errorf("method label %q is not in the fixed set", m[1])
		}
		if m[2] != "other" && !strings.HasPrefix(m[2], "/") {
			t.Errorf("route label %q", m[2])
		}
		if strings.Contains(m[2], "nope") || strings.Contains(m[2], "random") {
			t.Errorf("route label %q is a raw path", m[2])
		}
	}
	for _, want := range []string{"method=other", "route=other", "route=/v1/mirrors", "method=GET"} {
		if !seen[want] {
			t.Errorf("no series with %s; saw %v", want, seen)
		}
	}
}

// TestBadTextIs400: a NUL byte (or invalid UTF-8) in a path, a query, a
// config value or a SASL username is bad input: 400 problem+json, never a
// 500 from PostgreSQL (SQLSTATE 22021, 22P05); nothing changes.
func TestBadTextIs400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": "m1", "source": map[string]any{"bootstrap_servers": e.bootstrap}}), 201, nil)
	before := e.snapshot(t)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/mirrors/a%00b", ""},
		{"GET", "/v1/mirrors/a%ffb", ""},
		{"DELETE", "/v1/mirrors/a%00b", ""},
		{"GET", "/v1/mirrors/m1/topics/or%00ders", ""},
		{"GET", "/v1/partitions?mirror=m%00", ""},
		{"GET", "/v1/events?mirror=m%00", ""},
		{"POST", "/v1/mirrors", `{"name":"m2","source":{"bootstrap_servers":"` + e.bootstrap + `"},"config":{"mirror.metadata.refresh.interval.ms":"1\u0000"}}`},
		{"POST", "/v1/mirrors", `{"name":"m2","source":{"bootstrap_servers":"` + e.bootstrap + `","security_protocol":"SASL_PLAINTEXT","sasl_mechanism":"PLAIN","sasl_username":"u\u0000","sasl_password":"p"}}`},
		{"POST", "/v1/mirrors", `{"name":"m2","source":{"bootstrap_servers":"` + e.bootstrap + `"},"config":{"a\u0000":"1"}}`},
		{"PATCH", "/v1/mirrors/m1", `{"config":{"topics.include":"x\u0000"}}`},
		{"POST", "/v1/mirrors/m1/topics:add", `{"topic":"orders\u0000"}`},
		{"POST", "/v1/mirrors/m1/topics:pause", `{"topic":"\u0000"}`},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		r := e.do(t, c.method, c.path, body)
		if r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s %s: %s, want 400 problem+json", c.method, c.path, c.body, r)
		}
	}
	e.unchanged(t, before)
	if strings.Contains(e.logs.String(), "level=ERROR") {
		t.Fatalf("an error was logged:\n%s", e.logs.String())
	}
}

// TestBodiesMustBeJSONOnce: a content type other than application/json
// (none, or a +json one) is 415; a key twice in one object (or twice but
// for case, which Go's decoder would fold together) is 400. Nothing
// changes.
func TestBodiesMustBeJSONOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": "m1", "source": map[string]any{"bootstrap_servers": e.bootstrap}}), 201, nil)
	before := e.snapshot(t)
	mirror := `{"name":"m2","source":{"bootstrap_servers":"` + e.bootstrap + `"}}`
	for _, ct := range []string{"application/evil+json", "application/problem+json", "text/json", ""} {
		r := e.do(t, "POST", "/v1/mirrors", mirror, "Content-Type", ct)
		wantProblem(t, r, 415, "unsupported-media-type", "application/json")
	}
	for _, body := range []string{
		`{"topic":"orders","topic":"payments"}`,
		`{"topic":"orders","TOPIC":"payments"}`,
		`{"topic":"orders","Topic":"payments","replication_factor":1}`,
	} {
		wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add", body), 400, "malformed-json", "twice")
	}
	wantProblem(t, e.do(t, "POST", "/v1/mirrors",
		`{"name":"m3","source":{"bootstrap_servers":"`+e.bootstrap+`","bootstrap_servers":"127.0.0.1:1"}}`), 400, "malformed-json", `"bootstrap_servers"`)
	wantProblem(t, e.do(t, "PATCH", "/v1/mirrors/m1",
		`{"config":{"topics.include":"a","topics.include":"b"}}`), 400, "malformed-json", `"topics.include"`)
	e.unchanged(t, before)
	// The same key in sibling objects is no duplicate.
	ok(t, e.do(t, "POST", "/v1/mirrors", `{"name":"m4","source":{"bootstrap_servers":"`+e.bootstrap+`"},"config":{"topics.include":"x"}}`), 201, nil)
}

// TestBearerSchemeIsCaseInsensitive: RFC 7235 makes the scheme
// case-insensitive, so "bearer" and "BEARER" work as "Bearer" does.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{tokens: api.Tokens{Admin: "admin-secret"}})
	for _, h := range []string{"Bearer admin-secret", "bearer admin-secret", "BEARER admin-secret", "bEaReR  admin-secret"} {
		ok(t, e.do(t, "GET", "/v1/whoami", nil, "Authorization", h), 200, nil)
	}
	for _, h := range []string{"Basic admin-secret", "Bearer", "Bearer wrong", "admin-secret", "Bearer-admin-secret"} {
		wantProblem(t, e.do(t, "GET", "/v1/whoami", nil, "Authorization", h), 401, "unauthenticated")
	}
}

// TestChangeRateLimit: past its burst, a caller's changes get 429 with
// Retry-After; its reads, and another token's changes, are not limited.
func TestChangeRateLimit(t *testing.T) {
	t.Parallel()
	// One change per 20s after the burst: a slow machine cannot refill the
	// bucket between the requests below.
	e := newEnvWith(t, envOpts{changeRate: 0.05, changeBurst: 3,
		tokens: api.Tokens{Admin: "admin-secret", File: []api.Token{fileToken("ci", api.RoleOperator, "ci-secret")}}})
	admin := []string{"Authorization", "Bearer admin-secret"}
	for range 3 {
		wantProblem(t, e.do(t, "POST", "/v1/mirrors/nope:sync", nil, admin...), 404, "not-found")
	}
	r := e.do(t, "POST", "/v1/mirrors/nope:sync", nil, admin...)
	p := wantProblem(t, r, 429, "rate-limited", "per second")
	if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 || n > 20 {
		t.Fatalf("Retry-After %q, want 1-20 seconds (%+v)", r.header.Get("Retry-After"), p)
	}
	ok(t, e.do(t, "GET", "/v1/mirrors", nil, admin...), 200, nil)
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/nope:sync", nil, "Authorization", "Bearer ci-secret"), 404, "not-found")
}

// TestEventStreamCap: a caller may hold only so many /v1/events streams
// at once; the next is 429, and closing one frees its place.
func TestEventStreamCap(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{maxStreams: 2})
	open := func() (*http.Response, error) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", e.url+"/v1/events", nil)
		return http.DefaultClient.Do(req)
	}
	var streams []*http.Response
	for range 2 {
		resp, err := open()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream: %v %v", resp, err)
		}
		streams = append(streams, resp)
	}
	resp, err := open()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || !strings.Contains(string(body), "rate-limited") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third stream: %d %s", resp.StatusCode, body)
	}
	streams[0].Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := open()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream's place was not freed: %d", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	streams[1].Body.Close()
}

// TestHTTPServerTimeouts: a trickled body and an idle keep-alive
// connection are cut off by the read and idle timeouts, and headers past
// MaxHeaderBytes are refused; the event stream outlives the write timeout
// (kept alive by comment lines), and so does a topic action's ?wait.
func TestHTTPServerTimeouts(t *testing.T) {
	t.Parallel()
	limits := api.HTTPServerConfig{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond, IdleTimeout: 500 * time.Millisecond, MaxHeaderBytes: 4 << 10}
	e := newEnvWith(t, envOpts{httpServer: &limits, keepAlive: 100 * time.Millisecond})
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": "m1", "source": map[string]any{"bootstrap_servers": e.bootstrap}}), 201, nil)
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add", map[string]any{"topic": "orders"}), 200, nil)
	addr := strings.TrimPrefix(e.url, "http://")

	t.Run("trickled body", func(t *testing.T) {
		t.Parallel()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		fmt.Fprintf(conn, "POST /v1/mirrors/m1/topics:pause HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{")
		closed := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, conn)
			close(closed)
		}()
		// 200 bytes at one per 50ms would take 10s.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 200; i++ {
			select {
			case <-closed:
				if d := time.Since(start); d > 3*time.Second {
					t.Fatalf("closed only after %s", d)
				}
				return
			case <-tick.C:
				_, _ = conn.Write([]byte(" "))
			}
		}
		t.Fatalf("a body trickled for %s was still being read", time.Since(start))
	})
	t.Run("idle connection", func(t *testing.T) {
		t.Parallel()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("idle connection: %v after %s, want EOF (closed by the server)", err, time.Since(start))
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("idle connection closed after %s", d)
		}
	})
	t.Run("huge headers", func(t *testing.T) {
		t.Parallel()
		r := e.do(t, "GET", "/healthz", nil, "X-Junk", strings.Repeat("a", 16<<10))
		if r.status != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("16 KiB header: %d", r.status)
		}
	})
	t.Run("event stream outlives the write timeout", func(t *testing.T) {
		t.Parallel()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", e.url+"/v1/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		start, keepAlives := time.Now(), 0
		for time.Since(start) < 2*time.Second {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended after %s (%d keep-alives): %v", time.Since(start), keepAlives, err)
			}
			if strings.HasPrefix(line, ": keep-alive") {
				keepAlives++
			}
		}
		// One per poll (500ms) once 100ms passed without an event; at
		// least two however slow the machine.
		if keepAlives < 2 {
			t.Fatalf("%d keep-alive lines in 2s, want one per poll", keepAlives)
		}
	})
	t.Run("wait outlives the write timeout", func(t *testing.T) {
		t.Parallel()
		// No worker runs, so the partitions never pause: the wait runs out
		// after 1.5s, three times the write and read timeouts.
		var res struct {
			Completed bool `json:"completed"`
		}
		// A pooled connection may have sat idle as long as the server's idle
		// timeout while the other subtests ran (2 cores run two at once): the
		// server may close it just as it is reused, an EOF that is not this
		// subtest's subject. A new connection carries the request.
		http.DefaultClient.CloseIdleConnections()
		start := time.Now()
		ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:pause?wait=1500ms", map[string]any{"topic": "orders"}), 200, &res)
		if d := time.Since(start); d < 1500*time.Millisecond || res.Completed {
			t.Fatalf("wait answered after %s, completed %v", d, res.Completed)
		}
	})
}

// fileToken is a tokens-file entry for a token.
func fileToken(name string, role api.Role, token string) api.Token {
	return api.Token{Name: name, Role: role, Hash: sha256Sum(token)}
}

func sha256Sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }

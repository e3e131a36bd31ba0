package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/api"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/testing/syncbuf"
	"kmirror/internal/testing/testdb"
	"kmirror/service"
)

// unreachable is a bootstrap server nothing listens on: connections to it
// are refused at once.
const unreachable = "127.0.0.1:1"

// env is one test's server: its own database, its own source cluster (topics
// orders with 3 partitions and payments with 1) and the full HTTP handler,
// wired as cmd/kmirror/server.go wires it.
type env struct {
	url       string
	pool      *pgxpool.Pool
	svc       *service.Control
	workers   *service.Workers // the data plane's face, for tests that play a worker
	kafka     *kfake.Cluster
	bootstrap string
	logs      *syncbuf.Buffer
	// streamToken, when set, is the bearer token readSSE sends.
	streamToken string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, envOpts{})
}

// envOpts add to what newEnv wires.
type envOpts struct {
	// historyInterval, when set, starts a History sampling this often.
	historyInterval time.Duration
	tokens          api.Tokens
	openAPI         []byte
	// changeRate limits changes per caller; 0 (the tests' default) turns
	// the limit off.
	changeRate  float64
	changeBurst int
	maxStreams  int
	keepAlive   time.Duration
	// httpServer, when set, serves through api.NewHTTPServer with these
	// limits instead of httptest's defaults.
	httpServer *api.HTTPServerConfig
	public     bool
	// describeRate and describeBurst set the describe budget (0: the
	// server's defaults); requestTimeout each /v1 request's deadline.
	describeRate   float64
	describeBurst  int
	requestTimeout time.Duration
	// secrets seal source secrets; default a fresh key, as a server with
	// KMIRROR_SECRET_KEY_FILE. noSecretKey runs without one, and
	// insecureClearSecrets then stores secrets as given.
	secrets              service.SecretKeys
	noSecretKey          bool
	insecureClearSecrets bool
	// sourceTimeout is the service's source timeout (0: its default).
	sourceTimeout time.Duration
	// destinationIsSource makes the env's cluster the server's
	// destination too (preflight checks).
	destinationIsSource bool
	// preflight, when set, checks the clusters before topics:add.
	preflight service.Preflight
	// destinationRegistry is the server's destination Schema Registry.
	destinationRegistry *schemaregistry.Config
}

func newEnvWith(t *testing.T, opts envOpts) *env {
	t.Helper()
	pool := testdb.Pool(t)
	kafka, err := kfake.NewCluster(kfake.SeedTopics(3, "orders"), kfake.SeedTopics(1, "payments"))
	if err != nil {
		t.Fatalf("start kfake cluster: %v", err)
	}
	t.Cleanup(kafka.Close)

	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var history *service.History
	if opts.historyInterval > 0 {
		if history, err = service.NewHistory(service.HistoryConfig{Pool: pool, Logger: log, Interval: opts.historyInterval}); err != nil {
			t.Fatal(err)
		}
		if err := history.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(history.Stop)
	}
	secrets := opts.secrets
	if secrets == nil && !opts.noSecretKey {
		secrets = newKeyring(t)
	}
	var destination kafkaconn.Config
	if opts.destinationIsSource {
		destination = kafkaconn.Config{BootstrapServers: kafka.ListenAddrs()}
	}
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(2 * time.Second), Logger: log,
		History: history, Secrets: secrets, InsecureClearSecrets: opts.insecureClearSecrets, SourceTimeout: opts.sourceTimeout,
		Destination: destination, Preflight: opts.preflight, DestinationRegistry: opts.destinationRegistry})
	if err != nil {
		t.Fatal(err)
	}
	changeRate := opts.changeRate
	if changeRate == 0 {
		changeRate = -1
	}
	h, err := api.NewHandler(api.Config{Service: svc, Pool: pool, Logger: log, Tokens: opts.tokens,
		OpenAPI: opts.openAPI, ChangeRate: changeRate, ChangeBurst: opts.changeBurst,
		MaxStreams: opts.maxStreams, EventKeepAlive: opts.keepAlive,
		PublicMetrics: opts.public, PublicDocs: opts.public, DescribeRate: opts.describeRate,
		DescribeBurst: opts.describeBurst, RequestTimeout: opts.requestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	if opts.httpServer != nil {
		srv.Config = api.NewHTTPServer(h, *opts.httpServer)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if t.Failed() {
			log := logs.String()
			if len(log) > 8000 {
				log = "…" + log[len(log)-8000:]
			}
			t.Logf("server log (tail):\n%s", log)
		}
	})
	workers, err := service.NewWorkers(service.WorkersConfig{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return &env{url: srv.URL, pool: pool, svc: svc, workers: workers, kafka: kafka,
		bootstrap: strings.Join(kafka.ListenAddrs(), ","), logs: logs}
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string {
	return fmt.Sprintf("%d %s: %s", r.status, r.header.Get("Content-Type"), r.body)
}

// do sends a request. body is sent as is when it is a string or []byte and
// as JSON otherwise; nil sends none. hdr holds header name/value pairs; a
// body gets Content-Type application/json unless hdr sets one.
func (e *env) do(t *testing.T, method, path string, body any, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// ok checks a successful JSON response and decodes it into out (when not nil).
func ok(t *testing.T, r response, status int, out any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; response %s", r.status, status, r)
	}
	if status == http.StatusNoContent {
		return
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json; response %s", ct, r)
	}
	if out != nil {
		// Decode into a zero value: json merges into maps already there.
		reflect.ValueOf(out).Elem().SetZero()
		if err := json.Unmarshal(r.body, out); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
	}
}

// wantProblem checks a problem+json response: its status, stable type,
// a detail naming each of details, and the request id it carries.
func wantProblem(t *testing.T, r response, status int, kind string, details ...string) api.Problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; response %s", r.status, status, r)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; response %s", ct, r)
	}
	var p api.Problem
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decode problem %s: %v", r.body, err)
	}
	if want := api.ProblemType("urn:kmirror:problem:" + kind); p.Type != want {
		t.Fatalf("problem type %q, want %q; response %s", p.Type, want, r)
	}
	if p.Status != status || p.Title == "" || p.Instance == "" {
		t.Fatalf("problem status/title/instance incomplete: %+v", p)
	}
	for _, d := range details {
		if !strings.Contains(p.Detail, d) {
			t.Fatalf("problem detail %q does not name %q", p.Detail, d)
		}
	}
	if id := r.header.Get("X-Request-Id"); id == "" || p.RequestID != id {
		t.Fatalf("problem request_id %q, X-Request-Id header %q: want equal and set", p.RequestID, id)
	}
	return p
}

// tables are every table an API call may write.
var tables = []string{"mirrors", "mirror_topics", "mirror_partitions", "offset_map_runs", "events", "outbox"}

// snapshot is each table's row count and a digest of its full content.
type snapshot map[string]tableState

type tableState struct {
	Rows   int64
	Digest string
}

func (e *env) snapshot(t *testing.T) snapshot {
	t.Helper()
	s := snapshot{}
	for _, tbl := range tables {
		var st tableState
		err := e.pool.QueryRow(t.Context(), `SELECT count(*), coalesce(md5(string_agg(x::text, '|' ORDER BY x::text)), '')
			FROM `+tbl+` x`).Scan(&st.Rows, &st.Digest)
		if err != nil {
			t.Fatalf("snapshot %s: %v", tbl, err)
		}
		s[tbl] = st
	}
	return s
}

// unchanged fails when any table differs from before.
func (e *env) unchanged(t *testing.T, before snapshot) {
	t.Helper()
	after := e.snapshot(t)
	for _, tbl := range tables {
		if before[tbl] != after[tbl] {
			t.Fatalf("table %s changed: rows %d → %d (content digest %s → %s)", tbl,
				before[tbl].Rows, after[tbl].Rows, before[tbl].Digest, after[tbl].Digest)
		}
	}
}

// grew checks how many rows each named table gained since before; tables
// not named must be unchanged.
func (e *env) grew(t *testing.T, before snapshot, delta map[string]int64) snapshot {
	t.Helper()
	after := e.snapshot(t)
	for _, tbl := range tables {
		want := before[tbl].Rows + delta[tbl]
		if after[tbl].Rows != want {
			t.Fatalf("table %s has %d rows, want %d (%+d)", tbl, after[tbl].Rows, want, delta[tbl])
		}
		if _, named := delta[tbl]; !named && before[tbl] != after[tbl] {
			t.Fatalf("table %s changed but should not have", tbl)
		}
	}
	return after
}

func (e *env) count(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := e.pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// createMirror creates a mirror on the env's source cluster.
func (e *env) createMirror(t *testing.T, name string) api.Mirror {
	t.Helper()
	var m api.Mirror
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{
		"name": name, "source": map[string]any{"bootstrap_servers": e.bootstrap}}), http.StatusCreated, &m)
	return m
}

// topicsAction posts {"topic": pattern} to topics:<action> and expects 200.
func (e *env) topicsAction(t *testing.T, mirror, action, pattern string) api.TopicsResult {
	t.Helper()
	var res api.TopicsResult
	ok(t, e.do(t, "POST", "/v1/mirrors/"+mirror+"/topics:"+action, map[string]any{"topic": pattern}), http.StatusOK, &res)
	if res.Mirror != mirror || res.Action != api.TopicsAction(action) {
		t.Fatalf("result %+v: want mirror %s action %s", res, mirror, action)
	}
	return res
}

func (e *env) desiredState(t *testing.T, mirror, topic string) string {
	t.Helper()
	var s string
	if err := e.pool.QueryRow(t.Context(), `SELECT desired_state FROM mirror_topics WHERE mirror = $1 AND topic = $2`,
		mirror, topic).Scan(&s); err != nil {
		t.Fatalf("desired state of %s/%s: %v", mirror, topic, err)
	}
	return s
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/api"
	"kmirror/openapi"
)

// sdkTestDir is the npm folder of the TypeScript client, relative to this
// package.
const sdkTestDir = "../../openapi/sdk-test"

// TestTypeScriptSDK generates a TypeScript client from the spec a live
// server serves (openapi-typescript, for openapi-fetch), type-checks the
// example program that calls every operation (openapi/sdk-test/example.ts)
// with tsc --strict, and runs it with node against an in-process server
// (kfake source and destination, API tokens) through a proxy that validates
// every request and response against the spec: statuses, content types,
// required fields, nullability, enums and date-times, and each message of the
// event streams it reads (a partition.state one and a resume with
// Last-Event-ID among them). It fails on any
// answer the spec does not describe and on any operation the program did not
// call, so the spec, the generated types and the server cannot drift apart.
//
// It needs node and `npm ci --prefix openapi/sdk-test`. Without them it
// skips, unless KMIRROR_OPENAPI_TESTS=required (as .ci/run sets), when it
// fails.
func TestTypeScriptSDK(t *testing.T) {
	requireNodeTools(t)
	t.Parallel()
	tokens := api.Tokens{Admin: "sdk-admin-token", Read: "sdk-read-token"}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// openapi-typescript fetches the spec without a token: served in the
	// open, as --public-docs serves it.
	srv := startInProcessServer(t, log, func(c *serverConfig) { c.Tokens, c.PublicDocs = tokens, true })
	produceBench(t, srv.clusters.SourceAddr(), 10)

	v := newSpecValidator(t, openapi.JSON)
	target, _ := url.Parse(srv.base)
	proxy := httptest.NewServer(v.proxy(target))
	t.Cleanup(proxy.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The types come from the spec the server serves, not from the file.
	if err := runNode(ctx, t, "openapi-typescript", nil, "node_modules/.bin/openapi-typescript",
		proxy.URL+"/openapi.json", "-o", "gen/schema.d.ts"); err != nil {
		t.Fatal(err)
	}
	if err := runNode(ctx, t, "tsc --strict", nil, "node_modules/.bin/tsc", "-p", "tsconfig.json"); err != nil {
		t.Fatal(err)
	}
	programErr := runNode(ctx, t, "the example program", []string{"KMIRROR_URL=" + proxy.URL,
		"KMIRROR_ADMIN_TOKEN=" + tokens.Admin, "KMIRROR_READ_TOKEN=" + tokens.Read,
		"KMIRROR_SOURCE=" + srv.clusters.SourceAddr()}, "node", "dist/example.js")
	for _, err := range v.errors() {
		t.Error(err)
	}
	if programErr != nil {
		t.Fatal(programErr)
	}
	// The stream's messages were checked too, a state change and a resume
	// among them.
	events, resumed := v.streamed()
	t.Logf("event stream messages checked, by kind: %v; on streams resumed with Last-Event-ID: %d", events, resumed)
	if events["partition.state"] == 0 || resumed == 0 {
		t.Errorf("the proxy checked %v stream messages (%d resumed): want a partition.state one and one after Last-Event-ID", events, resumed)
	}
	seen := v.seen()
	var report []string
	for _, op := range v.operations() {
		codes := seen[op]
		if len(codes) == 0 {
			t.Errorf("the example program never called %s", op)
		}
		report = append(report, fmt.Sprintf("%s: %v", op, codes))
	}
	t.Logf("statuses seen per operation:\n%s", strings.Join(report, "\n"))
}

// requireNodeTools skips the test when node or the npm packages of
// openapi/sdk-test are missing, unless KMIRROR_OPENAPI_TESTS=required.
func requireNodeTools(t *testing.T) {
	t.Helper()
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not installed"
	} else if _, err := os.Stat(filepath.Join(sdkTestDir, "node_modules", ".package-lock.json")); err != nil {
		missing = "the npm packages of openapi/sdk-test are not installed (npm ci --prefix openapi/sdk-test)"
	}
	if missing == "" {
		return
	}
	if os.Getenv("KMIRROR_OPENAPI_TESTS") == "required" {
		t.Fatalf("cannot run: %s", missing)
	}
	t.Skipf("skipped: %s (KMIRROR_OPENAPI_TESTS=required makes this a failure)", missing)
}

// runNode runs a command in openapi/sdk-test, with env added to this
// process's environment, and logs its output.
func runNode(ctx context.Context, t *testing.T, what string, env []string, name string, args ...string) error {
	t.Helper()
	env = append(append(os.Environ(), "NO_COLOR=1", "NO_UPDATE_NOTIFIER=1", "REDOCLY_SUPPRESS_NOTIFICATIONS=true",
		"REDOCLY_TELEMETRY=off"), env...)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = sdkTestDir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("%s:\n%s", what, out.String())
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// produceBench writes n records to each partition of the source's topic
// bench, so that there is something to mirror and translate.
func produceBench(t *testing.T, source string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(source), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var records []*kgo.Record
	for p := range int32(3) {
		for i := range n {
			records = append(records, &kgo.Record{Topic: "bench", Partition: p, Value: []byte(strconv.Itoa(i))})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// specValidator is a reverse proxy that checks every exchange against the
// OpenAPI document.
type specValidator struct {
	routes []specRoute

	mu       sync.Mutex
	problems []string
	statuses map[string][]int // operation id -> statuses seen
	// events counts the stream messages checked, by kind; resumed those
	// on streams opened with Last-Event-ID.
	events  map[string]int
	resumed int
}

type specRoute struct {
	re    *regexp.Regexp
	route *routers.Route
	names []string // path parameters, in order
}

// invalidRequestHeader marks a request that breaks the spec on purpose (a
// wrong content type, a body too large): only its answer is checked.
const invalidRequestHeader = "X-Kmirror-Sdk-Test"

func newSpecValidator(t *testing.T, spec []byte) *specValidator {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		t.Fatal(err)
	}
	// kin-openapi checks date-time only when asked.
	openapi3.DefineStringFormatValidator("date-time", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringDateTime))
	v := &specValidator{statuses: map[string][]int{}, events: map[string]int{}}
	// regexp.QuoteMeta turns {name} into \{name\}: each becomes a group
	// that stops at / and : (no name kmirror accepts has either).
	param := regexp.MustCompile(`\\\{([^}\\]+)\\\}`)
	for path, item := range doc.Paths.Map() {
		var names []string
		pattern := param.ReplaceAllStringFunc("^"+regexp.QuoteMeta(path)+"$", func(m string) string {
			names = append(names, strings.Trim(m, `\{}`))
			return `([^/:]+)`
		})
		re := regexp.MustCompile(pattern)
		for method, op := range item.Operations() {
			v.routes = append(v.routes, specRoute{re: re, names: names, route: &routers.Route{
				Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}})
		}
	}
	return v
}

// operations lists every operation id of the document, sorted.
func (v *specValidator) operations() []string {
	var out []string
	for _, r := range v.routes {
		out = append(out, r.route.Operation.OperationID)
	}
	sort.Strings(out)
	return out
}

func (v *specValidator) errors() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.problems)
}

func (v *specValidator) streamed() (map[string]int, int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.events), v.resumed
}

func (v *specValidator) seen() map[string][]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string][]int{}
	for op, codes := range v.statuses {
		c := slices.Clone(codes)
		slices.Sort(c)
		out[op] = slices.Compact(c)
	}
	return out
}

// fail records a problem; one whose first line was already recorded (a
// poll that keeps getting the same answer) only once, and 20 at most.
func (v *specValidator) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	first, _, _ := strings.Cut(msg, "\n")
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.problems) >= 20 || slices.ContainsFunc(v.problems, func(p string) bool { return strings.HasPrefix(p, first+"\n") || p == first }) {
		return
	}
	v.problems = append(v.problems, msg)
}

func (v *specValidator) find(r *http.Request) (*routers.Route, map[string]string) {
	for _, sr := range v.routes {
		if sr.route.Method != r.Method {
			continue
		}
		m := sr.re.FindStringSubmatch(r.URL.Path)
		if m == nil {
			continue
		}
		params := map[string]string{}
		for i, name := range sr.names {
			params[name], _ = url.PathUnescape(m[i+1])
		}
		return sr.route, params
	}
	return nil, nil
}

type exchangeKey struct{}

// exchange is what the proxy remembers of a request until its answer.
type exchange struct {
	input *openapi3filter.RequestValidationInput
	name  string
}

func (v *specValidator) proxy(target *url.URL) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // the event stream
	rp.ModifyResponse = func(resp *http.Response) error {
		ex, _ := resp.Request.Context().Value(exchangeKey{}).(*exchange)
		if ex == nil {
			return nil // not an operation of the spec (/openapi.json)
		}
		return v.checkResponse(ex, resp)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, params := v.find(r)
		if route == nil {
			if r.URL.Path != "/openapi.json" {
				v.fail("%s %s: no operation of the spec", r.Method, r.URL.Path)
			}
			rp.ServeHTTP(w, r)
			return
		}
		name := route.Operation.OperationID
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		in := &openapi3filter.RequestValidationInput{Request: r.Clone(r.Context()), PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
		in.Request.Body = io.NopCloser(bytes.NewReader(body))
		if r.Header.Get(invalidRequestHeader) == "" {
			if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
				v.fail("%s: the request breaks the spec: %v", name, err)
			}
		}
		r.Header.Del(invalidRequestHeader)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, &exchange{input: in, name: name})))
	})
}

func (v *specValidator) checkResponse(ex *exchange, resp *http.Response) error {
	v.mu.Lock()
	v.statuses[ex.name] = append(v.statuses[ex.name], resp.StatusCode)
	v.mu.Unlock()
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: ex.input, Status: resp.StatusCode,
		Header: resp.Header, Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The stream never ends: check its status and media type now, and
		// each message as it passes.
		out.Options.ExcludeResponseBody = true
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			v.fail("%s %d: %v", ex.name, resp.StatusCode, err)
		}
		media := ex.input.Route.Operation.Responses.Status(resp.StatusCode).Value.Content.Get("text/event-stream")
		if media == nil {
			v.fail("%s %d: text/event-stream is not documented", ex.name, resp.StatusCode)
			return nil
		}
		resuming := ex.input.Request.Header.Get("Last-Event-ID") != ""
		resp.Body = &sseChecker{ReadCloser: resp.Body, schema: media.Schema.Value, fail: func(err error) {
			v.fail("%s: an event stream message breaks the spec: %v", ex.name, err)
		}, checked: func(kind string) {
			v.mu.Lock()
			defer v.mu.Unlock()
			v.events[kind]++
			if resuming {
				v.resumed++
			}
		}}
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		v.fail("%s %d: the response breaks the spec: %v\n%s", ex.name, resp.StatusCode, err, truncate(body, 500))
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// sseChecker passes an event stream through and checks each message with
// data against the schema of one message: {id, event, data}.
type sseChecker struct {
	io.ReadCloser
	schema  *openapi3.Schema
	fail    func(error)
	checked func(kind string) // each message that passed, by its event name
	buf     []byte
}

func (c *sseChecker) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.buf = append(c.buf, p[:n]...)
	for {
		end := bytes.Index(c.buf, []byte("\n\n"))
		if end < 0 {
			break
		}
		block := string(c.buf[:end])
		c.buf = c.buf[end+2:]
		msg := map[string]any{}
		for _, line := range strings.Split(block, "\n") {
			if k, val, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, ":") {
				msg[k] = val
			}
		}
		data, ok := msg["data"].(string)
		if !ok {
			continue // a keep-alive comment
		}
		var decoded any
		if err := json.Unmarshal([]byte(data), &decoded); err != nil {
			c.fail(fmt.Errorf("data is not JSON: %v: %s", err, data))
			continue
		}
		msg["data"] = decoded
		if err := c.schema.VisitJSON(msg, openapi3.MultiErrors()); err != nil {
			c.fail(fmt.Errorf("%v: %s", err, block))
		} else {
			kind, _ := msg["event"].(string)
			c.checked(kind)
		}
	}
	return n, err
}

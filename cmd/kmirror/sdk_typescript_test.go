package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"kmirror/api"
	"kmirror/openapi"
)

// sdkTypeScriptDir is the TypeScript client package, relative to this
// package.
const sdkTypeScriptDir = "../../sdk/typescript"

// TestTypeScriptClient checks the client package of sdk/typescript
// (@kmirror/client): its committed types are what openapi-typescript makes
// of openapi/openapi.json, it builds, its example and the README's snippet
// type-check with tsc --strict (the event union narrowed by kind, no
// casts; the snippet with only what the README's install line installs),
// and its tests pass
// (npm test): the SSE parser's and events() over a fake fetch, then
// events() against an in-process server (kfake clusters, PostgreSQL, API
// tokens) behind the spec-validating proxy of TestTypeScriptSDK, behind a
// streamCutter that drops one stream in the middle of a message and stalls
// another. The node tests show typed events, a resume after each with no
// event lost or repeated, and an abort that ends the loop within 1 s.
//
// It needs node and `npm ci --prefix sdk/typescript` (and, as
// TestTypeScriptSDK, openapi/sdk-test's packages). Without them it skips,
// unless KMIRROR_OPENAPI_TESTS=required (as .ci/run sets), when it fails.
func TestTypeScriptClient(t *testing.T) {
	requireNodeTools(t)
	dir, err := filepath.Abs(sdkTypeScriptDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		missing := "the npm packages of sdk/typescript are not installed (npm ci --prefix sdk/typescript)"
		if os.Getenv("KMIRROR_OPENAPI_TESTS") == "required" {
			t.Fatalf("cannot run: %s", missing)
		}
		t.Skipf("skipped: %s (KMIRROR_OPENAPI_TESTS=required makes this a failure)", missing)
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// runNode runs in openapi/sdk-test; npm --prefix runs the package's
	// scripts in its own folder.
	npm := func(what string, env []string, args ...string) error {
		return runNode(ctx, t, what, env, "npm", append([]string{"--prefix", dir, "--no-update-notifier"}, args...)...)
	}

	// The committed types are those the spec in the repository makes.
	fresh := filepath.Join(t.TempDir(), "schema.d.ts")
	if err := runNode(ctx, t, "openapi-typescript", nil, filepath.Join(dir, "node_modules", ".bin", "openapi-typescript"),
		filepath.Join(dir, "..", "..", "openapi", "openapi.json"), "-o", fresh); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "src", "schema.d.ts")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("sdk/typescript/src/schema.d.ts is not what openapi/openapi.json generates (%v): run npm run generate --prefix sdk/typescript", err)
	}
	if err := npm("npm run build", nil, "run", "build"); err != nil {
		t.Fatal(err)
	}
	if err := npm("tsc --strict on example.ts", nil, "run", "check-example"); err != nil {
		t.Fatal(err)
	}
	checkREADMESnippet(ctx, t, dir)

	tokens := api.Tokens{Admin: "sdk-ts-admin-token"}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := startInProcessServer(t, log, func(c *serverConfig) { c.Tokens = tokens })
	v := newSpecValidator(t, openapi.JSON)
	target, _ := url.Parse(srv.base)
	validating := httptest.NewServer(v.proxy(target))
	t.Cleanup(validating.Close)
	cutter := newStreamCutter(t, validating.URL)
	front := httptest.NewServer(cutter)
	t.Cleanup(front.Close)

	testErr := npm("npm test", []string{"KMIRROR_URL=" + front.URL, "KMIRROR_TOKEN=" + tokens.Admin,
		"KMIRROR_SOURCE=" + srv.clusters.SourceAddr()}, "test")
	for _, err := range v.errors() {
		t.Error(err)
	}
	if testErr != nil {
		t.Fatal(testErr)
	}
	// The node tests did run against the server: streams were cut, and
	// resumed.
	kinds, resumed := v.streamed()
	t.Logf("event stream messages checked against the spec, by kind: %v; on streams opened with Last-Event-ID: %d", kinds, resumed)
	streams := cutter.list()
	cut := map[string]int{}
	for _, s := range streams {
		cut[s.Cut]++
	}
	if kinds["partition.state"] == 0 || resumed == 0 || cut["mid-message"] != 1 || cut["stall"] != 1 {
		t.Errorf("want partition.state messages, messages after Last-Event-ID and one stream cut each way; got %v, %d resumed, streams %+v",
			kinds, resumed, streams)
	}
}

// streamCutter is a reverse proxy to target that can cut the event streams
// passing through it, for the node tests of sdk/typescript:
//
//   - POST /_test/streams:cut?mode=mid-message arms every open stream to
//     forward the next message only up to the middle of its data line and
//     then drop the connection (a network that fails mid-message);
//   - POST /_test/streams:cut?mode=stall arms them to forward nothing more
//     and keep the connection open (a network that hangs);
//   - GET /_test/streams lists the streams opened (each with the
//     Last-Event-ID it was asked with), oldest first.
type streamCutter struct {
	target *url.URL
	rp     *httputil.ReverseProxy

	mu      sync.Mutex
	streams []*cutStream
}

type cutStream struct {
	LastEventID string `json:"last_event_id"` // of the request
	Query       string `json:"query"`
	Open        bool   `json:"open"`
	// Cut is how it was cut (mid-message, stall), once it was;
	// CutMessageID the id of the message cut in half.
	Cut          string `json:"cut,omitempty"`
	CutMessageID string `json:"cut_message_id,omitempty"`
	armed        string
}

func newStreamCutter(t *testing.T, target string) *streamCutter {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	return &streamCutter{target: u, rp: rp}
}

func (c *streamCutter) list() []cutStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]cutStream, len(c.streams))
	for i, s := range c.streams {
		out[i] = *s
	}
	return out
}

func (c *streamCutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_test/streams" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c.list())
	case r.URL.Path == "/_test/streams:cut" && r.Method == http.MethodPost:
		mode := r.URL.Query().Get("mode")
		if mode != "mid-message" && mode != "stall" {
			http.Error(w, "mode is mid-message or stall", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		armed := 0
		for _, s := range c.streams {
			if s.Open && s.Cut == "" {
				s.armed = mode
				armed++
			}
		}
		c.mu.Unlock()
		if armed == 0 {
			http.Error(w, "no open stream to cut", http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/v1/events":
		c.stream(w, r)
	default:
		c.rp.ServeHTTP(w, r)
	}
}

// messageStart finds, in a chunk of the stream, a message's id line
// followed by its data line: the id, and where the data line starts.
var messageStart = regexp.MustCompile(`(?m)^id: (\d+)\n(?:event: [^\n]*\n)?data: `)

func (c *streamCutter) stream(w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = c.target.Scheme, c.target.Host, "", ""
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	_ = rc.Flush()
	s := &cutStream{LastEventID: r.Header.Get("Last-Event-ID"), Query: r.URL.RawQuery, Open: true}
	c.mu.Lock()
	c.streams = append(c.streams, s)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		s.Open = false
		c.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		chunk := buf[:n]
		c.mu.Lock()
		mode := s.armed
		c.mu.Unlock()
		switch m := messageStart.FindSubmatchIndex(chunk); {
		case mode == "stall":
			// Read on, forward nothing: the connection stays open until
			// the client gives up on it, which ends the upstream read.
			c.mark(s, "stall", "")
			chunk = nil
		case mode == "mid-message" && m != nil:
			// Up to 8 bytes into the data: no whole message, and the
			// id and event lines of this one already passed.
			_, _ = w.Write(chunk[:min(m[1]+8, len(chunk))])
			_ = rc.Flush()
			c.mark(s, "mid-message", string(chunk[m[2]:m[3]]))
			panic(http.ErrAbortHandler) // drops the connection, the body unfinished
		}
		if len(chunk) > 0 {
			if _, werr := w.Write(chunk); werr != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *streamCutter) mark(s *cutStream, how, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.Cut, s.CutMessageID = how, id
	if how == "mid-message" {
		s.armed = ""
	}
}

// readmeCodeBlock is a sh or ts block of the README; readmeDevInstall the
// arguments of an `npm install --save-dev` line.
var (
	readmeCodeBlock  = regexp.MustCompile("(?ms)^```(sh|ts)\n(.*?)^```$")
	readmeDevInstall = regexp.MustCompile(`(?m)^npm install --save-dev (.*)$`)
)

// checkREADMESnippet type-checks the README's @kmirror/client snippet with
// tsc --strict in a project of its own that holds what the README has a
// reader install, and no more: the package built from sdkDir, and each
// name@version of its `npm install --save-dev` line, taken at that version
// from the packages the tests installed. A snippet that needs a package
// the line leaves out (process needs @types/node) fails to compile, as it
// would for the reader.
func checkREADMESnippet(ctx context.Context, t *testing.T, sdkDir string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(sdkDir, "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var install, snippet string
	for _, b := range readmeCodeBlock.FindAllStringSubmatch(string(readme), -1) {
		switch {
		case b[1] == "sh" && strings.Contains(b[2], "npm install /path/to/kmirror/sdk/typescript"):
			if m := readmeDevInstall.FindStringSubmatch(b[2]); m != nil {
				install = m[1]
			}
		case b[1] == "ts" && strings.Contains(b[2], `from "@kmirror/client"`) && install != "" && snippet == "":
			snippet = b[2]
		}
	}
	if install == "" || snippet == "" {
		t.Fatalf("README.md: no `npm install --save-dev` line after `npm install /path/to/kmirror/sdk/typescript`, or no @kmirror/client snippet after it")
	}

	project := t.TempDir()
	modules := filepath.Join(project, "node_modules")
	link := func(name, target string) {
		t.Helper()
		at := filepath.Join(modules, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, at); err != nil {
			t.Fatal(err)
		}
	}
	link("@kmirror/client", sdkDir)
	installed := []string{filepath.Join(sdkDir, "node_modules"), sdkTestDir + "/node_modules"}
	for _, arg := range strings.Fields(install) {
		if strings.HasPrefix(arg, "-") {
			continue
		}
		at := strings.LastIndex(arg, "@")
		if at <= 0 {
			t.Errorf("README.md's install line: %s has no pinned version (name@version)", arg)
			continue
		}
		name, version := arg[:at], arg[at+1:]
		found := ""
		for _, dir := range installed {
			var pkg struct{ Version string }
			if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name), "package.json")); err == nil &&
				json.Unmarshal(b, &pkg) == nil && pkg.Version == version {
				found, _ = filepath.Abs(filepath.Join(dir, filepath.FromSlash(name)))
				break
			}
		}
		if found == "" {
			t.Errorf("README.md's install line names %s, which neither sdk/typescript's nor openapi/sdk-test's packages hold at that version", arg)
			continue
		}
		link(name, found)
	}
	files := map[string]string{
		"snippet.ts":   snippet,
		"package.json": `{"type": "module"}`,
		"tsconfig.json": `{"compilerOptions": {"strict": true, "noEmit": true, "target": "ES2022",
			"module": "NodeNext", "moduleResolution": "NodeNext"}, "files": ["snippet.ts"]}`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(project, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := runNode(ctx, t, "tsc --strict on the README's snippet", nil, filepath.Join(sdkDir, "node_modules", ".bin", "tsc"),
		"-p", filepath.Join(project, "tsconfig.json")); err != nil {
		t.Fatalf("the README's @kmirror/client snippet does not compile with what its install line installs: %v", err)
	}
}

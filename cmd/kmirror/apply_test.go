package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/openapi/client"
)

// writeCounter is a proxy in front of an API server that records every
// request that could change something: not a GET, not a dry run, not a
// preflight check.
type writeCounter struct {
	url    string
	mu     sync.Mutex
	writes []string
}

func newWriteCounter(t *testing.T, server string) *writeCounter {
	t.Helper()
	target, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	wc := &writeCounter{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.URL.Query().Get("dry_run") != "true" && !strings.HasSuffix(r.URL.Path, ":check") {
			wc.mu.Lock()
			wc.writes = append(wc.writes, r.Method+" "+r.URL.Path)
			wc.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	wc.url = srv.URL
	return wc
}

func (wc *writeCounter) take() []string {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	w := wc.writes
	wc.writes = nil
	return w
}

// runCmd runs `kmirror args...` in process.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("kmirror %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
	}
	return out
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantLines(t *testing.T, what, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Errorf("%s: output does not contain %q:\n%s", what, l, out)
		}
	}
}

// getMirror reads a mirror as the API returns it.
func getMirror(t *testing.T, server, name string) client.Mirror {
	t.Helper()
	resp, err := http.Get(server + "/v1/mirrors/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m client.Mirror
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&m) != nil {
		t.Fatalf("GET mirror %s: %d", name, resp.StatusCode)
	}
	return m
}

// topicStates maps each of a mirror's topics to its desired state.
func topicStates(t *testing.T, server, mirror string) map[string]string {
	t.Helper()
	resp, err := http.Get(server + "/v1/mirrors/" + mirror + "/topics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list client.TopicList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tp := range list.Topics {
		out[tp.Topic] = string(tp.DesiredState)
	}
	return out
}

// TestApplyTwiceAndExportRoundTrip: a file creates a mirror with config and
// topics (one paused); applying it again says so and writes nothing;
// export → apply changes nothing, and export again gives the same file.
func TestApplyTwiceAndExportRoundTrip(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	wc := newWriteCounter(t, e.server)
	dir := t.TempDir()
	file := writeFile(t, dir, "mirrors.yaml", `apiVersion: kmirror/v1
kind: Mirrors
mirrors:
  - name: east
    source:
      bootstrap_servers: `+e.source+`
    config:
      mirror.metadata.refresh.interval.ms: "30000"
    topics:
      - topic: other-topic
        state: paused
      - topic: my-.*
`)
	out := mustRun(t, "apply", "--server", wc.url, "-f", file)
	wantLines(t, "first apply", out,
		"Plan for "+file+":\n",
		"  create mirror east\n",
		"      config mirror.metadata.refresh.interval.ms: 30000\n",
		`  add to mirror east: the source topics matching "other-topic", once it exists, then pause them`,
		"Done: create mirror east\n",
		"Done: add to mirror east: other-topic (1 partition(s))\n",
		"Done: add to mirror east: my-topic (3 partition(s))\n",
		"Done: pause in mirror east: other-topic\n",
		"Applied "+file+": 4 step(s).\n")
	if got := topicStates(t, e.server, "east"); got["my-topic"] != "mirroring" || got["other-topic"] != "paused" || len(got) != 2 {
		t.Fatalf("topics after apply: %v", got)
	}
	if w := wc.take(); len(w) != 4 {
		t.Fatalf("first apply made %d writes, want 4: %v", len(w), w)
	}

	out = mustRun(t, "apply", "--server", wc.url, "-f", file)
	if out != "No changes: the deployment matches "+file+".\n" {
		t.Fatalf("second apply:\n%s", out)
	}
	if w := wc.take(); len(w) != 0 {
		t.Fatalf("second apply wrote %v", w)
	}

	exported := filepath.Join(dir, "exported.yaml")
	mustRun(t, "export", "--server", wc.url, "-o", exported)
	first, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "export", string(first), "name: east", "topic: other-topic\n        state: paused", "topic: my-topic\n        state: mirroring",
		"mirror.metadata.refresh.interval.ms: \"30000\"")
	out = mustRun(t, "apply", "--server", wc.url, "-f", exported)
	if out != "No changes: the deployment matches "+exported+".\n" {
		t.Fatalf("apply of the export:\n%s", out)
	}
	if w := wc.take(); len(w) != 0 {
		t.Fatalf("apply of the export wrote %v", w)
	}
	again := mustRun(t, "export", "--server", wc.url)
	if again != string(first) {
		t.Fatalf("export → apply → export differs:\n%s\nthen\n%s", first, again)
	}

	// A new source topic that the pattern my-.* matches is added by the
	// next apply, beside my-topic, which the pattern matched already.
	admin := kadm.NewClient(newKgoClient(t, e.source))
	if _, err := admin.CreateTopic(t.Context(), 2, 1, nil, "my-new-topic"); err != nil {
		t.Fatal(err)
	}
	out = mustRun(t, "apply", "--server", wc.url, "-f", file)
	wantLines(t, "apply after a new source topic", out, "Done: add to mirror east: my-new-topic (2 partition(s))\n", "Applied "+file+": 1 step(s).\n")
	if w := wc.take(); len(w) != 1 {
		t.Fatalf("apply of a new topic wrote %v", w)
	}
}

func newKgoClient(t *testing.T, bootstrap string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestApplyDryRunPlan: the plan of a file against a deployment names each
// change the API state calls for (config, add, pause, resume, remove with
// its failover preview, prune delete) and changes nothing.
func TestApplyDryRunPlan(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	e.mustMirrors(t, "Created mirror west.\n", "--create", "--mirror", "west", "--source-bootstrap", e.source,
		"--config", "mirror.metadata.refresh.interval.ms=30000")
	e.mirrors(t, "--add", "--mirror", "west", "--topic", "my-topic|other-topic")
	e.mirrors(t, "--pause", "--mirror", "west", "--topic", "other-topic")
	e.mustMirrors(t, "Created mirror old.\n", "--create", "--mirror", "old", "--source-bootstrap", e.source)
	wc := newWriteCounter(t, e.server)
	dir := t.TempDir()
	file := writeFile(t, dir, "mirrors.yaml", `apiVersion: kmirror/v1
kind: Mirrors
mirrors:
  - name: west
    source:
      bootstrap_servers: `+e.source+`
    config:
      mirror.metadata.refresh.interval.ms: "10000"
    topics:
      - topic: my-topic
        state: removed
      - topic: other-topic
      - topic: third-topic
        state: paused
`)
	before := topicStates(t, e.server, "west")
	code, out, errOut := runCmd(t, "apply", "--server", wc.url, "-f", file, "--dry-run", "--exit-code")
	if code != 3 {
		t.Fatalf("dry run: exit %d, want 3\n%s%s", code, out, errOut)
	}
	t.Logf("the plan:\n%s", out)
	wantLines(t, "dry run", out,
		"  update mirror west\n      config mirror.metadata.refresh.interval.ms: 30000 → 10000\n",
		"  add to mirror west: third-topic (3 partition(s))\n",
		"  resume in mirror west: other-topic\n",
		"  pause in mirror west: third-topic\n",
		"  remove from mirror west (failover: the destination topics become writable): my-topic\n",
		"      TOPIC                                    PARTITION  STATE        LAG      NEWEST-NOT-COPIED\n",
		"Not in the file, left alone (--prune removes them):\n  mirror old (0 topic(s) mirroring or paused)\n",
		"Plan: 0 mirror(s) to create, 1 to update, 0 to delete; topics: 1 to add, 0 to restart, 1 to resume, 1 to pause, 1 to remove.\n",
		"Nothing was changed (dry run).\n")
	if strings.Contains(out, "delete mirror old") {
		t.Errorf("dry run without --prune deletes old:\n%s", out)
	}
	out = mustRun(t, "apply", "--server", wc.url, "-f", file, "--dry-run", "--prune")
	wantLines(t, "dry run --prune", out, "  delete mirror old\n", "1 to delete;")
	if w := wc.take(); len(w) != 0 {
		t.Fatalf("dry runs wrote %v", w)
	}
	if after := topicStates(t, e.server, "west"); len(after) != len(before) || after["my-topic"] != before["my-topic"] {
		t.Fatalf("dry run changed topics: %v → %v", before, after)
	}

	out = mustRun(t, "apply", "--server", wc.url, "-f", file, "--prune")
	wantLines(t, "apply --prune", out, "Done: delete mirror old\n", "Done: remove from mirror west")
	want := map[string]string{"my-topic": "stopped", "other-topic": "mirroring", "third-topic": "paused"}
	if got := topicStates(t, e.server, "west"); len(got) != 3 || got["my-topic"] != want["my-topic"] ||
		got["other-topic"] != want["other-topic"] || got["third-topic"] != want["third-topic"] {
		t.Fatalf("topics after apply: %v, want %v", got, want)
	}
	if m := getMirror(t, e.server, "west"); m.Config["mirror.metadata.refresh.interval.ms"] != "10000" {
		t.Fatalf("config after apply: %v", m.Config)
	}
	out = mustRun(t, "apply", "--server", wc.url, "-f", file, "--prune")
	if out != "No changes: the deployment matches "+file+".\n" {
		t.Fatalf("apply again:\n%s", out)
	}
}

// TestApplySecrets: a secret written in the file is refused by its field;
// secrets from the environment and from files reach the server, which then
// says they are set.
func TestApplySecrets(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	sasl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "admin", "admin-secret-apply"), kfake.SeedTopics(1, "sasl-topic"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sasl.Close)
	dir := t.TempDir()

	plain := writeFile(t, dir, "plain.yaml", `apiVersion: kmirror/v1
kind: Mirrors
mirrors:
  - name: leaky
    source:
      bootstrap_servers: `+e.source+`
      security_protocol: SASL_PLAINTEXT
      sasl_mechanism: PLAIN
      sasl_username: admin
      sasl_password: hunter2-in-the-file
`)
	code, out, errOut := runCmd(t, "apply", "--server", e.server, "-f", plain)
	if code != 1 || !strings.Contains(errOut, "mirrors[0] (leaky): source.sasl_password (line 10): a secret is never written in the file") ||
		strings.Contains(errOut+out, "hunter2") {
		t.Fatalf("plain secret: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	// os.Setenv, not t.Setenv, so the test runs in parallel: the
	// variable's name is this test's own.
	setenv := func(v string) {
		if err := os.Setenv("APPLY_TEST_SASL_PASSWORD", v); err != nil {
			t.Fatal(err)
		}
	}
	setenv("admin-secret-apply")
	t.Cleanup(func() { os.Unsetenv("APPLY_TEST_SASL_PASSWORD") })
	pw := writeFile(t, dir, "registry-password", "registry-pw\n")
	file := writeFile(t, dir, "mirrors.yaml", `apiVersion: kmirror/v1
kind: Mirrors
mirrors:
  - name: secured
    source:
      bootstrap_servers: `+strings.Join(sasl.ListenAddrs(), ",")+`
      security_protocol: SASL_PLAINTEXT
      sasl_mechanism: PLAIN
      sasl_username: admin
      sasl_password: {env: APPLY_TEST_SASL_PASSWORD}
      schema_registry:
        urls: [http://registry:8081]
        basic_auth_username: sr
        basic_auth_password: {file: registry-password}
    topics:
      - topic: sasl-topic
`)
	_ = pw
	out = mustRun(t, "apply", "--server", e.server, "-f", file)
	wantLines(t, "apply", out, "      sasl_password: from env APPLY_TEST_SASL_PASSWORD\n", "Done: add to mirror secured: sasl-topic")
	if strings.Contains(out, "admin-secret-apply") || strings.Contains(out, "registry-pw") {
		t.Fatalf("the plan shows a secret:\n%s", out)
	}
	m := getMirror(t, e.server, "secured")
	if !m.Source.SaslPasswordSet || m.Source.SchemaRegistry == nil || !m.Source.SchemaRegistry.BasicAuthPasswordSet {
		t.Fatalf("secrets not set on the server: %+v", m.Source)
	}
	// Set on the server and unchanged in the file: not sent again, unless
	// asked.
	if out := mustRun(t, "apply", "--server", e.server, "-f", file); !strings.HasPrefix(out, "No changes") {
		t.Fatalf("apply again:\n%s", out)
	}
	out = mustRun(t, "apply", "--server", e.server, "-f", file, "--update-secrets", "--dry-run")
	wantLines(t, "--update-secrets", out, "      sasl_password: set → from env APPLY_TEST_SASL_PASSWORD (--update-secrets)\n",
		"      schema_registry.basic_auth_password: set → from file registry-password (--update-secrets)\n")

	// An exported secret is a placeholder with a comment.
	exp := mustRun(t, "export", "--server", e.server, "--mirror", "secured")
	wantLines(t, "export", exp, "sasl_password: {env: KMIRROR_SECURED_SASL_PASSWORD}",
		"basic_auth_password: {env: KMIRROR_SECURED_SCHEMA_REGISTRY_BASIC_AUTH_PASSWORD}",
		"# The server has this secret and never returns it: set KMIRROR_SECURED_SASL_PASSWORD")

	setenv("")
	code, _, errOut = runCmd(t, "apply", "--server", e.server, "-f", file, "--update-secrets")
	if code != 1 || !strings.Contains(errOut, "source.sasl_password: environment variable APPLY_TEST_SASL_PASSWORD is empty or unset") {
		t.Fatalf("unset secret: exit %d: %s", code, errOut)
	}

	// The source moves to a PLAINTEXT cluster: the SASL fields the file
	// no longer names are cleared, the password with them.
	plaintext := writeFile(t, dir, "plaintext.yaml", `apiVersion: kmirror/v1
kind: Mirrors
mirrors:
  - name: secured
    source:
      bootstrap_servers: `+e.source+`
      schema_registry:
        urls: [http://registry:8081]
        basic_auth_username: sr
        basic_auth_password: {file: registry-password}
    topics:
      - topic: sasl-topic
`)
	out = mustRun(t, "apply", "--server", e.server, "-f", plaintext)
	wantLines(t, "apply plaintext", out, "      security_protocol: SASL_PLAINTEXT → PLAINTEXT\n", "      sasl_mechanism: PLAIN → \"\"\n",
		"      sasl_password: set → (cleared: not in the file)\n",
		"      schema_registry.basic_auth_password: set → from file registry-password (sent with the source's other changes)\n",
		"Done: update mirror secured\n")
	m = getMirror(t, e.server, "secured")
	if m.Source.SaslPasswordSet || m.Source.SecurityProtocol != "PLAINTEXT" || m.Source.SaslMechanism != nil {
		t.Fatalf("source after the move: %+v", m.Source)
	}
	if out := mustRun(t, "apply", "--server", e.server, "-f", plaintext); !strings.HasPrefix(out, "No changes") {
		t.Fatalf("apply again:\n%s", out)
	}
}

// TestApplyHeldBackAndNotInFile: a topic no entry matches is listed and
// left alone, and removed only with --prune; a stopped topic the file
// wants mirrored is held back, and restarted only with --restart-stopped.
func TestApplyHeldBackAndNotInFile(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	e.mustMirrors(t, "Created mirror north.\n", "--create", "--mirror", "north", "--source-bootstrap", e.source)
	e.mirrors(t, "--add", "--mirror", "north", "--topic", "my-topic|other-topic")
	e.mirrors(t, "--remove", "--mirror", "north", "--topic", "my-topic")
	file := writeFile(t, t.TempDir(), "mirrors.yaml", `apiVersion: kmirror/v1
kind: Mirrors
mirrors:
  - name: north
    source:
      bootstrap_servers: `+e.source+`
    topics:
      - topic: my-topic
`)
	out := mustRun(t, "apply", "--server", e.server, "-f", file)
	if want := "No changes: the deployment matches " + file + ", but for what is held back below.\n" +
		"Not in the file, left alone (--prune removes them):\n  north: topic other-topic (mirroring)\n" +
		"Held back:\n  north: topic my-topic is stopped (removed) and the file wants it mirroring: restarting it is a failback, " +
		"which copies again; give --restart-stopped (with the entry's recreate or continue if the destination was written to)\n"; out != want {
		t.Fatalf("apply:\n%s\nwant\n%s", out, want)
	}
	out = mustRun(t, "apply", "--server", e.server, "-f", file, "--restart-stopped", "--prune")
	wantLines(t, "apply --restart-stopped --prune", out,
		"Done: restart in mirror north (stopped topics, a failback): my-topic\n",
		"Done: remove from mirror north (failover: the destination topics become writable): other-topic\n")
	if got := topicStates(t, e.server, "north"); got["my-topic"] != "mirroring" || got["other-topic"] != "stopped" {
		t.Fatalf("topics: %v", got)
	}
}

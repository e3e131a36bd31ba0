package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/api"
	"kmirror/internal/runtime/secretbox"
	"kmirror/internal/testing/testdb"
	"kmirror/openapi"
	"kmirror/openapi/client"
	"kmirror/service"
)

// seedHeader is the describe header exactly as the seed prints it, trailing
// spaces included.
const seedHeader = "MIRROR                         TOPIC                                    PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE       "

// describeHeader is the seed's header and kmirror's LAG-TIME after it.
const describeHeader = seedHeader + " LAG-TIME"

// mirrorsEnv is a real API server (handler, service, Postgres) and a kfake
// source cluster with my-topic (3 partitions), other-topic (1) and
// third-topic (3).
type mirrorsEnv struct {
	server string
	source string
	pool   *pgxpool.Pool
}

func newMirrorsEnv(t *testing.T) mirrorsEnv {
	t.Helper()
	return newMirrorsEnvWith(t, api.Tokens{})
}

// newMirrorsEnvWith is newMirrorsEnv with a server that checks tokens.
func newMirrorsEnvWith(t *testing.T, tokens api.Tokens) mirrorsEnv {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(3, "my-topic"), kfake.SeedTopics(1, "other-topic"), kfake.SeedTopics(3, "third-topic"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)

	pool := testdb.Pool(t)
	log := slog.New(slog.DiscardHandler)
	// A server with a secret key, as deployed: without one it refuses
	// source secrets before it checks the source.
	keyText, err := secretbox.NewKeyText()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secretbox.ParseKeys([]byte(keyText))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(2 * time.Second), Logger: log, Secrets: keys})
	if err != nil {
		t.Fatal(err)
	}
	handler, err := api.NewHandler(api.Config{Service: svc, Pool: pool, Logger: log, OpenAPI: openapi.JSON,
		Tokens: tokens, ChangeRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return mirrorsEnv{server: srv.URL, source: strings.Join(cluster.ListenAddrs(), ","), pool: pool}
}

// mirrors runs `kmirror mirrors --server URL args...` in process.
func (e mirrorsEnv) mirrors(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runMirrors(t, append([]string{"--server", e.server}, args...)...)
}

func runMirrors(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), append([]string{"mirrors"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustMirrors runs the command and fails unless it exits 0 with exactly want
// on stdout.
func (e mirrorsEnv) mustMirrors(t *testing.T, want string, args ...string) {
	t.Helper()
	code, out, errOut := e.mirrors(t, args...)
	if code != 0 {
		t.Fatalf("mirrors %v: exit %d, stderr:\n%s", args, code, errOut)
	}
	if out != want {
		t.Fatalf("mirrors %v: stdout\n%q\nwant\n%q", args, out, want)
	}
}

// wantFailure runs the command and checks its exit code and that stderr
// holds each of the fragments.
func (e mirrorsEnv) wantFailure(t *testing.T, wantCode int, fragments []string, args ...string) string {
	t.Helper()
	code, out, errOut := e.mirrors(t, args...)
	if code != wantCode {
		t.Fatalf("mirrors %v: exit %d, want %d; stdout %q, stderr %q", args, code, wantCode, out, errOut)
	}
	if out != "" {
		t.Errorf("mirrors %v: stdout %q, want nothing", args, out)
	}
	for _, f := range fragments {
		if !strings.Contains(errOut, f) {
			t.Errorf("mirrors %v: stderr %q does not contain %q", args, errOut, f)
		}
	}
	return errOut
}

func TestMirrorsLifecycle(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)

	e.mustMirrors(t, "Mirror my-mirror is valid (dry run, nothing created).\n",
		"--create", "--mirror", "my-mirror", "--source-bootstrap", e.source, "--dry-run")
	// No mirrors: stdout stays empty for scripts; stderr says so.
	if code, out, errOut := e.mirrors(t, "--list"); code != 0 || out != "" || errOut != "No mirrors on "+e.server+"; create one with --create.\n" {
		t.Fatalf("--list with no mirrors: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	e.mustMirrors(t, "Created mirror my-mirror.\n",
		"--create", "--mirror", "my-mirror", "--source-bootstrap", e.source,
		"--config", "mirror.metadata.refresh.interval.ms=10000")
	e.wantFailure(t, 1, []string{"Error: mirror my-mirror already exists"},
		"--create", "--mirror", "my-mirror", "--source-bootstrap", e.source)
	e.mustMirrors(t, "Created mirror new-mirror.\n",
		"--create", "--mirror", "new-mirror", "--source-bootstrap", e.source, "--skip-connectivity-check")
	e.mustMirrors(t, "my-mirror\nnew-mirror\n", "--list")

	e.mustMirrors(t, "Added 1 topic(s) to mirror my-mirror: [my-topic]\n",
		"--add", "--topic", "my-topic", "--mirror", "my-mirror", "--replication-factor", "1")
	// One topic, one mirror: every mirror writes the same destination names.
	e.wantFailure(t, 1, []string{"Error: cannot add: my-topic is mirrored by mirror my-mirror"},
		"--add", "--topic", ".*-topic", "--mirror", "new-mirror")
	e.mustMirrors(t, "Added 2 topic(s) to mirror new-mirror: [other-topic, third-topic]\n",
		"--add", "--topic", "other-topic|third-topic", "--mirror", "new-mirror")

	// No workers run here, so nothing has an offset or state yet: every
	// partition shows - for its offsets.
	code, out, errOut := e.mirrors(t, "--describe")
	if code != 0 {
		t.Fatalf("describe: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if lines[0] != describeHeader {
		t.Fatalf("describe header\n%q\nwant\n%q", lines[0], describeHeader)
	}
	if len(lines) != 1+3+3+1 {
		t.Fatalf("describe: %d lines, want header and 7 rows:\n%s", len(lines), out)
	}
	wantRows := []string{"my-mirror my-topic 0", "my-mirror my-topic 1", "my-mirror my-topic 2",
		"new-mirror other-topic 0", "new-mirror third-topic 0", "new-mirror third-topic 1", "new-mirror third-topic 2"}
	for i, want := range wantRows {
		f := strings.Fields(lines[i+1])
		if got := strings.Join(f[:3], " "); got != want || f[3] != "-" || f[4] != "-" || f[5] != "-" {
			t.Errorf("describe row %d: %q, want %s with - - -", i, lines[i+1], want)
		}
		if len(lines[i+1]) != len(seedHeader)+len(" -") || f[len(f)-1] != "-" {
			t.Errorf("describe row %d is %d characters wide, the seed's header and LAG-TIME - %d: %q", i, len(lines[i+1]), len(seedHeader)+2, lines[i+1])
		}
	}

	// Filters, and JSON.
	code, out, _ = e.mirrors(t, "--describe", "--mirror", "new-mirror", "--topic", "other.*")
	// The table, then the mirror's last metadata sync (none: no syncer runs here).
	if n := strings.Count(out, "\n"); code != 0 || n != 4 || !strings.HasPrefix(strings.Split(out, "\n")[1], "new-mirror ") ||
		!strings.Contains(out, "\nLast sync of new-mirror: none yet\n") {
		t.Errorf("describe --mirror new-mirror --topic other.*: exit %d, output:\n%s", code, out)
	}
	e.mustMirrors(t, describeHeader+"\n", "--describe", "--failed")
	code, out, errOut = e.mirrors(t, "--describe", "--mirror", "my-mirror", "--json")
	var rows []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 3 {
		t.Fatalf("describe --json: exit %d, stderr %q, output:\n%s", code, errOut, out)
	}
	if v, ok := rows[0]["source_offset"]; !ok || v != nil {
		t.Errorf("describe --json: source_offset %v (present %v), want null", v, ok)
	}
	if rows[0]["mirror"] != "my-mirror" || rows[0]["topic"] != "my-topic" {
		t.Errorf("describe --json: first row %v", rows[0])
	}

	// Pause, pause again (refused: the topic is paused), resume, remove.
	e.mustMirrors(t, "Paused mirroring for 1 topic(s): [my-topic]\n",
		"--pause", "--topic", "my-topic", "--mirror", "my-mirror")
	e.wantFailure(t, 1, []string{"Error: ", "my-topic is paused"},
		"--pause", "--topic", "my-topic", "--mirror", "my-mirror")
	e.mustMirrors(t, "Resumed mirroring for 1 topic(s): [my-topic]\n",
		"--resume", "--topic", "my-topic", "--mirror", "my-mirror")
	e.wantFailure(t, 1, []string{"Error: ", "my-topic is mirroring"},
		"--resume", "--topic", "my-topic", "--mirror", "my-mirror")

	e.wantFailure(t, 1, []string{"Error: ", "my-mirror", "not removed"}, "--delete", "--mirror", "my-mirror")
	e.mustMirrors(t, "Removed 1 topic(s) from mirror my-mirror: [my-topic]\n",
		"--remove", "--topic", "my-topic", "--mirror", "my-mirror")
	e.mustMirrors(t, "Deleted mirror my-mirror.\n", "--delete", "--mirror", "my-mirror")
	e.mustMirrors(t, "new-mirror\n", "--list")
	e.wantFailure(t, 1, []string{"Error: mirror my-mirror does not exist"}, "--delete", "--mirror", "my-mirror")
}

func TestMirrorsCreateUnreachableSource(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	e.wantFailure(t, 1, []string{"Error: ", dead}, "--create", "--mirror", "m1", "--source-bootstrap", dead)
	e.mustMirrors(t, "", "--list") // nothing was created
}

func TestMirrorsErrors(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	e.mustMirrors(t, "Created mirror my-mirror.\n", "--create", "--mirror", "my-mirror", "--source-bootstrap", e.source)

	e.wantFailure(t, 1, []string{`Error: no topic on the source cluster of mirror my-mirror matches "nothing.*"`},
		"--add", "--topic", "nothing.*", "--mirror", "my-mirror")
	e.wantFailure(t, 1, []string{`Error: no topic of mirror my-mirror matches "my-topic"`},
		"--pause", "--topic", "my-topic", "--mirror", "my-mirror")
	e.wantFailure(t, 1, []string{"Error: mirror nope does not exist"},
		"--add", "--topic", "my-topic", "--mirror", "nope")
	e.wantFailure(t, 1, []string{"Error: invalid input: ", "topic: "},
		"--add", "--topic", "(", "--mirror", "my-mirror")
	e.wantFailure(t, 1, []string{"Error: invalid input: ", "replication_factor"},
		"--add", "--topic", "my-topic", "--mirror", "my-mirror", "--replication-factor", "0")
	e.wantFailure(t, 1, []string{"Error: invalid input: ", "name"},
		"--create", "--mirror", "bad name", "--source-bootstrap", e.source)
	e.wantFailure(t, 1, []string{"Error: invalid input: ", "source.sasl_password"},
		"--create", "--mirror", "m2", "--source-bootstrap", e.source,
		"--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN", "--sasl-username", "u")
	e.wantFailure(t, 1, []string{"Error: invalid input: topic: "}, "--describe", "--topic", "(")
	e.wantFailure(t, 1, []string{"Error: mirror nope does not exist"}, "--describe", "--mirror", "nope")

	// The secret comes from a file, and a wrong password for a broker without
	// SASL still reaches the server's connectivity check.
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.wantFailure(t, 1, []string{"Error: ", e.source},
		"--create", "--mirror", "m3", "--source-bootstrap", e.source, "--security-protocol", "SASL_PLAINTEXT",
		"--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file", pw)
	e.wantFailure(t, 1, []string{"Error: --sasl-password-file: "},
		"--create", "--mirror", "m3", "--source-bootstrap", e.source, "--sasl-password-file", pw+".missing")

	// No server at all.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	code, _, errOut := runMirrors(t, "--server", dead, "--list")
	if code != 1 || !strings.Contains(errOut, "Error: cannot reach the kmirror server at http://"+dead) {
		t.Errorf("unreachable server: exit %d, stderr %q", code, errOut)
	}
}

func TestMirrorsServerFromEnv(t *testing.T) {
	e := newMirrorsEnv(t)
	t.Setenv("KMIRROR_SERVER", e.server)
	code, out, errOut := runMirrors(t, "--create", "--mirror", "env-mirror", "--source-bootstrap", e.source)
	if code != 0 || out != "Created mirror env-mirror.\n" {
		t.Fatalf("create via KMIRROR_SERVER: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestMirrorsUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no action", nil, "an action is required"},
		{"two actions", []string{"--add", "--pause", "--mirror", "m", "--topic", "t"}, "only one action at a time, not --add and --pause"},
		{"add without mirror", []string{"--add", "--topic", "t"}, "--add requires --mirror"},
		{"pause without topic", []string{"--pause", "--mirror", "m"}, "--pause requires --topic"},
		{"create without source", []string{"--create", "--mirror", "m"}, "--create requires --source-bootstrap"},
		{"delete without mirror", []string{"--delete"}, "--delete requires --mirror"},
		{"flag of another action", []string{"--pause", "--mirror", "m", "--topic", "t", "--replication-factor", "2"}, "--replication-factor does not apply to --pause"},
		{"unknown flag", []string{"--list", "--bogus", "x"}, "flag provided but not defined: -bogus\n"},
		{"mistyped flag", []string{"--lsit"}, "flag provided but not defined: -lsit; did you mean --list?"},
		{"flag's start", []string{"--list", "--source", "x"}, "flag provided but not defined: -source; did you mean --source-bootstrap?"},
		{"wait without a unit", []string{"--pause", "--mirror", "m", "--topic", "t", "--wait", "10"}, `invalid value "10" for flag -wait: parse error; a duration needs a unit, as in --wait 10s`},
		{"seed's Kafka flag", []string{"--bootstrap-server", ":9094", "--list"}, "use --server URL (or KMIRROR_SERVER) instead of --bootstrap-server"},
		{"stray argument", []string{"--list", "extra"}, `unexpected argument "extra"`},
		{"wait over 5m", []string{"--pause", "--mirror", "m", "--topic", "t", "--wait", "6m"}, "--wait 6m0s is out of range (0s, 5m0s]"},
		{"wait not a duration", []string{"--pause", "--mirror", "m", "--topic", "t", "--wait", "soon"}, `invalid value "soon" for flag -wait`},
		{"wait with describe", []string{"--describe", "--wait", "1s"}, "--wait does not apply to --describe"},
		{"bad config", []string{"--create", "--mirror", "m", "--source-bootstrap", "h:1", "--config", "novalue"}, `"novalue" is not KEY=VALUE`},
		{"bad server", []string{"--server", "ftp://x", "--list"}, `--server "ftp://x" is not an http(s) URL`},
		{"keep-divergent without continue", []string{"--add", "--mirror", "m", "--topic", "t", "--keep-divergent"}, "give it with --continue"},
		{"wait with add's dry run", []string{"--add", "--mirror", "m", "--topic", "t", "--continue", "--dry-run", "--wait", "1s"}, "--wait does not apply to --add --dry-run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runMirrors(t, tc.args...)
			if code != 2 || out != "" || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "kmirror mirrors --help") {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errOut, tc.want)
			}
			// The mistake and how to see help: not the whole usage.
			if n := strings.Count(errOut, "\n"); n != 2 {
				t.Errorf("stderr has %d lines, want 2 (the mistake, then how to see help): %q", n, errOut)
			}
		})
	}
	code, out, errOut := runMirrors(t, "--help")
	if code != 0 || !strings.HasPrefix(out, "Usage: kmirror mirrors") || !strings.Contains(out, "-replication-factor") || errOut != "" {
		t.Errorf("--help: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestDescribeTable checks the seed's layout byte for byte, with the seed's
// own rows, and how unknown offsets, errors and lost records print.
func TestDescribeTable(t *testing.T) {
	t.Parallel()
	row := func(mirror, topic string, partition int, src, dst, lag *int, state string) client.PartitionRow {
		return client.PartitionRow{Mirror: mirror, Topic: topic, Partition: partition,
			SourceOffset: src, DestinationOffset: dst, Lag: lag, State: client.PartitionState(state), LeaseLive: true}
	}
	n := func(v int) *int { return &v }
	var b bytes.Buffer
	bar, foo := row("my-mirror", "bar", 0, n(2324), n(2324), n(0), "MIRRORING"), row("my-mirror", "foo", 0, n(69), n(66), n(3), "MIRRORING")
	bar.LagMs, foo.LagMs = n(0), n(3249)
	writeDescribeTable(&b, []client.PartitionRow{bar, foo})
	want := describeHeader + "\n" +
		"my-mirror                      bar                                      0          2324            2324               0        MIRRORING    0s\n" +
		"my-mirror                      foo                                      0          69              66                 3        MIRRORING    3.2s\n"
	if b.String() != want {
		t.Errorf("seed rows:\n%q\nwant\n%q", b.String(), want)
	}

	failed := row("m", "t", 1, nil, n(5), nil, "FAILED")
	failed.Error, failed.RetryAttempt = ptr("source topic t was recreated"), 3
	lost := row("m", "t", 2, n(100), n(90), n(0), "MIRRORING")
	lost.LostRecords = 10
	lost.LagMs = n(int((2*time.Hour + 5*time.Minute).Milliseconds()))
	b.Reset()
	writeDescribeTable(&b, []client.PartitionRow{failed, lost})
	want = describeHeader + "\n" +
		"m                              t                                        1          -               5                  -        FAILED       -\n" +
		"m                              t                                        2          100             90                 0        MIRRORING    2h5m0s\n" +
		"\n" +
		"m/t/1: source topic t was recreated (retry attempt 3)\n" +
		"m/t/2: 10 record(s) removed by source retention before they were mirrored\n"
	if b.String() != want {
		t.Errorf("errors and lost records:\n%s\nwant\n%s", b.String(), want)
	}
	// A MIRRORING row nobody renews says so; a FAILED one waits anyway.
	orphan := row("m", "t", 3, n(10), n(10), n(0), "MIRRORING")
	orphan.LeaseLive, orphan.Owner, orphan.OwnerRenewedAt = false, ptr("i1"), ptr(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	idle := row("m", "t", 4, n(10), n(10), n(0), "FAILED")
	idle.LeaseLive = false
	b.Reset()
	writeDescribeTable(&b, []client.PartitionRow{orphan, idle})
	if want := "m/t/3: no live owner: the state is what the last owner left, until another instance takes over " +
		"(i1 last renewed 2026-12-02T10:00:00Z)\n"; !strings.HasSuffix(b.String(), "\n"+want) || strings.Contains(b.String(), "m/t/4") {
		t.Errorf("rows without a live owner:\n%s\nwant the note\n%s", b.String(), want)
	}
}

// TestContinuationTable checks how --add --continue --dry-run prints each
// outcome: the overlap, records to copy and a divergent tail in columns, a
// failing partition's reason in full below the table, and the sum.
func TestContinuationTable(t *testing.T) {
	t.Parallel()
	n := func(v int) *int { return &v }
	proof := client.PartitionContinuationProofOffsetMap
	var b bytes.Buffer
	writeContinuationTable(&b, "ba", []client.TopicContinuation{{Topic: "orders", Partitions: []client.PartitionContinuation{
		{Partition: 0, Outcome: client.PartitionContinuationOutcomeContinue, Proof: &proof, OverlapSourceOffset: n(30),
			OverlapDestinationOffset: n(36), RecordsToCopy: 15},
		{Partition: 1, Outcome: client.PartitionContinuationOutcomeFail, RecordsToCopy: 0,
			DivergentTail: &client.DivergentTail{StartOffset: 37, EndOffset: 40, Records: 3}, Detail: "the destination holds 3 record(s)"},
		{Partition: 2, Outcome: client.PartitionContinuationOutcomeCopy, RecordsToCopy: 7},
	}}})
	want := strings.Join([]string{
		fmt.Sprintf(continuationFormat, "MIRROR", "TOPIC", "PARTITION", "OUTCOME", "PROOF", "OVERLAP-SRC→DST", "TO-COPY", "DIVERGENT-TAIL"),
		fmt.Sprintf(continuationFormat, "ba", "orders", "0", "continue", "offset_map", "30→36", "15", "-"),
		fmt.Sprintf(continuationFormat, "ba", "orders", "1", "fail", "-", "-", "0", "3 in [37, 40)"),
		fmt.Sprintf(continuationFormat, "ba", "orders", "2", "copy", "-", "-", "7", "-"),
		"  orders/1: the destination holds 3 record(s)\n",
		"Adding would copy up to 22 source offset(s) for 2 partition(s); 1 partition(s) hold a divergent tail; " +
			"1 partition(s) would go FAILED (above); nothing was changed (dry run).\n",
	}, "")
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

package api_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/api"
	"kmirror/internal/runtime/secretbox"
)

// TestMirrorLifecycle walks one mirror through create, topic actions, config
// changes and delete, checking each response, each refusal, and that every
// change wrote its event and outbox rows together.
func TestMirrorLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.snapshot(t)

	// Create.
	r := e.do(t, "POST", "/v1/mirrors", map[string]any{
		"name": "m1", "source": map[string]any{"bootstrap_servers": e.bootstrap}})
	var m api.Mirror
	ok(t, r, http.StatusCreated, &m)
	if loc := r.header.Get("Location"); loc != "/v1/mirrors/m1" {
		t.Fatalf("Location %q, want /v1/mirrors/m1", loc)
	}
	if m.Name != "m1" || m.Source.BootstrapServers != e.bootstrap || m.Source.SecurityProtocol != "PLAINTEXT" ||
		m.Source.SASLPasswordSet || len(m.Config) != 0 {
		t.Fatalf("created mirror %+v", m)
	}
	if got := m.EffectiveConfig["mirror.metadata.refresh.interval.ms"]; got != "30000" {
		t.Fatalf("effective refresh interval %q, want the default 30000", got)
	}
	if got := m.EffectiveConfig["topics.exclude"]; got != "__.*" {
		t.Fatalf("effective topics.exclude %q, want __.*", got)
	}
	s = e.grew(t, s, map[string]int64{"mirrors": 1, "events": 1, "outbox": 1})
	e.lastEvent(t, "mirror.created", "m1")
	e.lastOutbox(t, "mirror/m1", true)

	var got api.Mirror
	ok(t, e.do(t, "GET", "/v1/mirrors/m1", nil), http.StatusOK, &got)
	if got.Name != "m1" || !got.CreatedAt.Equal(m.CreatedAt) {
		t.Fatalf("GET mirror %+v, want %+v", got, m)
	}
	var list api.MirrorList
	ok(t, e.do(t, "GET", "/v1/mirrors", nil), http.StatusOK, &list)
	if len(list.Mirrors) != 1 || list.Mirrors[0].Name != "m1" {
		t.Fatalf("mirror list %+v", list)
	}

	// Add two topics by pattern: sorted, one partition row each, UNKNOWN.
	res := e.topicsAction(t, "m1", "add", "payments|orders")
	if !slices.Equal(res.Topics, []string{"orders", "payments"}) {
		t.Fatalf("added %v, want [orders payments]", res.Topics)
	}
	s = e.grew(t, s, map[string]int64{"mirror_topics": 2, "mirror_partitions": 4, "events": 1, "outbox": 2})
	e.lastEvent(t, "topics.added", "m1")
	e.lastOutbox(t, "topic/m1/payments", true)

	var parts api.PartitionList
	ok(t, e.do(t, "GET", "/v1/partitions?mirror=m1", nil), http.StatusOK, &parts)
	want := []string{"orders/0", "orders/1", "orders/2", "payments/0"}
	if got := partitionKeys(parts); !slices.Equal(got, want) {
		t.Fatalf("partitions %v, want %v", got, want)
	}
	for _, p := range parts.Partitions {
		if p.Mirror != "m1" || p.State != "UNKNOWN" || p.Lag != nil || p.SourceOffset != nil || p.Owner != nil {
			t.Fatalf("new partition row %+v, want UNKNOWN with nothing known", p)
		}
	}
	for query, want := range map[string][]string{
		"?state=UNKNOWN":           want,
		"?state=unknown&mirror=m1": want,
		"?state=MIRRORING":         nil,
		"?topic=pay.*":             {"payments/0"},
		"?topic=ord":               nil, // whole-name match
	} {
		var l api.PartitionList
		ok(t, e.do(t, "GET", "/v1/partitions"+query, nil), http.StatusOK, &l)
		if got := partitionKeys(l); !slices.Equal(got, want) {
			t.Fatalf("partitions%s = %v, want %v", query, got, want)
		}
	}

	var topics api.TopicList
	ok(t, e.do(t, "GET", "/v1/mirrors/m1/topics", nil), http.StatusOK, &topics)
	if len(topics.Topics) != 2 {
		t.Fatalf("topics %+v", topics)
	}
	for i, want := range []struct {
		name  string
		parts int
	}{{"orders", 3}, {"payments", 1}} {
		tp := topics.Topics[i]
		if tp.Mirror != "m1" || tp.Topic != want.name || tp.DesiredState != "mirroring" ||
			tp.Partitions != want.parts || tp.States.Unknown != want.parts || tp.ReplicationFactor != -1 {
			t.Fatalf("topic %d = %+v, want %s mirroring with %d UNKNOWN partitions", i, tp, want.name, want.parts)
		}
	}
	var detail api.TopicDetail
	ok(t, e.do(t, "GET", "/v1/mirrors/m1/topics/orders", nil), http.StatusOK, &detail)
	if detail.Topic.Topic != "orders" || detail.Partitions != 3 || len(detail.PartitionRows) != 3 ||
		detail.PartitionRows[2].Partition != 2 {
		t.Fatalf("topic detail %+v", detail)
	}
	wantProblem(t, e.do(t, "GET", "/v1/mirrors/m1/topics/nope", nil), 404, "not-found", "mirror m1 has no topic nope")

	// Adding a mirroring topic again is refused, naming it.
	p := wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add", map[string]any{"topic": "orders"}),
		409, "conflict", "cannot add", "orders is mirroring")
	wantTopics(t, p, "orders=mirroring")
	e.unchanged(t, s)

	// A pattern matching no source topic.
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add", map[string]any{"topic": "nothing.*"}),
		404, "no-match", `matches "nothing.*"`, "m1")
	e.unchanged(t, s)

	// Pause, then pausing again is refused.
	if res := e.topicsAction(t, "m1", "pause", "orders"); !slices.Equal(res.Topics, []string{"orders"}) {
		t.Fatalf("paused %v", res.Topics)
	}
	s = e.grew(t, s, map[string]int64{"mirror_topics": 0, "events": 1, "outbox": 1})
	e.lastEvent(t, "topics.paused", "m1")
	e.lastOutbox(t, "topic/m1/orders", true)
	if st := e.desiredState(t, "m1", "orders"); st != "paused" {
		t.Fatalf("orders desired %s, want paused", st)
	}
	p = wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:pause", map[string]any{"topic": "orders"}),
		409, "conflict", "orders", "paused")
	wantTopics(t, p, "orders=paused")
	e.unchanged(t, s)

	// All or nothing: payments could be paused, orders cannot, so neither is.
	p = wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:pause", map[string]any{"topic": "orders|payments"}),
		409, "conflict", "orders is paused")
	wantTopics(t, p, "orders=paused")
	e.unchanged(t, s)
	if st := e.desiredState(t, "m1", "payments"); st != "mirroring" {
		t.Fatalf("payments desired %s after a refused pause, want mirroring", st)
	}

	// Resume of a mirroring topic is refused; of a paused one, done.
	p = wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:resume", map[string]any{"topic": "payments"}),
		409, "conflict", "cannot resume", "payments is mirroring")
	wantTopics(t, p, "payments=mirroring")
	e.unchanged(t, s)
	e.topicsAction(t, "m1", "resume", "orders")
	s = e.grew(t, s, map[string]int64{"mirror_topics": 0, "events": 1, "outbox": 1})
	e.lastEvent(t, "topics.resumed", "m1")

	// Delete is refused while topics are not stopped.
	wantProblem(t, e.do(t, "DELETE", "/v1/mirrors/m1", nil), 409, "conflict", "m1", "2 topic(s) not removed")
	e.unchanged(t, s)

	// Remove everything; removing again is refused.
	if res := e.topicsAction(t, "m1", "remove", ".*"); !slices.Equal(res.Topics, []string{"orders", "payments"}) {
		t.Fatalf("removed %v", res.Topics)
	}
	s = e.grew(t, s, map[string]int64{"mirror_topics": 0, "events": 1, "outbox": 2})
	e.lastEvent(t, "topics.removed", "m1")
	p = wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:remove", map[string]any{"topic": "orders"}),
		409, "conflict", "cannot remove", "orders is stopped")
	wantTopics(t, p, "orders=stopped")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:pause", map[string]any{"topic": "payments"}),
		409, "conflict", "payments is stopped")
	e.unchanged(t, s)

	// Restart a stopped topic: its partitions are kept, not duplicated.
	if res := e.topicsAction(t, "m1", "add", "orders"); !slices.Equal(res.Topics, []string{"orders"}) {
		t.Fatalf("re-added %v", res.Topics)
	}
	s = e.grew(t, s, map[string]int64{"mirror_topics": 0, "mirror_partitions": 0, "events": 1, "outbox": 1})
	if st := e.desiredState(t, "m1", "orders"); st != "mirroring" {
		t.Fatalf("orders desired %s after restart, want mirroring", st)
	}
	wantProblem(t, e.do(t, "DELETE", "/v1/mirrors/m1", nil), 409, "conflict", "1 topic(s) not removed")
	e.unchanged(t, s)
	e.topicsAction(t, "m1", "remove", "orders")
	s = e.grew(t, s, map[string]int64{"mirror_topics": 0, "events": 1, "outbox": 1})

	// Config: set a key, then reset it to its default with null.
	var upd api.Mirror
	ok(t, e.do(t, "PATCH", "/v1/mirrors/m1", map[string]any{
		"config": map[string]any{"mirror.metadata.refresh.interval.ms": "60000", "topics.include": "ord.*"}}), http.StatusOK, &upd)
	if upd.Config["mirror.metadata.refresh.interval.ms"] != "60000" || upd.EffectiveConfig["mirror.metadata.refresh.interval.ms"] != "60000" ||
		upd.Config["topics.include"] != "ord.*" || upd.Source.BootstrapServers != e.bootstrap {
		t.Fatalf("patched mirror %+v", upd)
	}
	s = e.grew(t, s, map[string]int64{"mirrors": 0, "events": 1, "outbox": 1})
	e.lastEvent(t, "mirror.updated", "m1")
	e.lastOutbox(t, "mirror/m1", true)
	ok(t, e.do(t, "PATCH", "/v1/mirrors/m1", map[string]any{
		"config": map[string]any{"mirror.metadata.refresh.interval.ms": nil}}), http.StatusOK, &upd)
	if _, set := upd.Config["mirror.metadata.refresh.interval.ms"]; set ||
		upd.EffectiveConfig["mirror.metadata.refresh.interval.ms"] != "30000" || upd.Config["topics.include"] != "ord.*" {
		t.Fatalf("after reset: config %v effective %v", upd.Config, upd.EffectiveConfig)
	}
	s = e.grew(t, s, map[string]int64{"mirrors": 0, "events": 1, "outbox": 1})
	ok(t, e.do(t, "GET", "/v1/mirrors/m1", nil), http.StatusOK, &got)
	if len(got.Config) != 1 || got.Config["topics.include"] != "ord.*" {
		t.Fatalf("stored config %v, want only topics.include", got.Config)
	}
	// A dry-run patch answers with the result and writes nothing.
	ok(t, e.do(t, "PATCH", "/v1/mirrors/m1?dry_run=true", map[string]any{
		"config": map[string]any{"topics.include": nil}}), http.StatusOK, &upd)
	if _, set := upd.Config["topics.include"]; set {
		t.Fatalf("dry-run patch result %v still has topics.include", upd.Config)
	}
	e.unchanged(t, s)

	// Delete: cascades, and tombstones every key the mirror published.
	r = e.do(t, "DELETE", "/v1/mirrors/m1", nil)
	ok(t, r, http.StatusNoContent, nil)
	if len(r.body) != 0 {
		t.Fatalf("204 with a body: %q", r.body)
	}
	e.grew(t, s, map[string]int64{"mirrors": -1, "mirror_topics": -2, "mirror_partitions": -4, "events": 1, "outbox": 7})
	e.lastEvent(t, "mirror.deleted", "m1")
	rows, err := e.pool.Query(t.Context(), `SELECT key FROM outbox WHERE value IS NULL AND mirror = 'm1' ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	var tombstones []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		tombstones = append(tombstones, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wantTomb := []string{"mirror/m1", "partition/m1/orders/0", "partition/m1/orders/1", "partition/m1/orders/2",
		"partition/m1/payments/0", "topic/m1/orders", "topic/m1/payments"}
	if !slices.Equal(tombstones, wantTomb) {
		t.Fatalf("tombstones %v, want %v", tombstones, wantTomb)
	}
	// The mirror tombstone is the last record, so a replay ends with it gone.
	e.lastOutbox(t, "mirror/m1", false)

	wantProblem(t, e.do(t, "GET", "/v1/mirrors/m1", nil), 404, "not-found", "mirror m1 does not exist")
	ok(t, e.do(t, "GET", "/v1/mirrors", nil), http.StatusOK, &list)
	if list.Mirrors == nil || len(list.Mirrors) != 0 {
		t.Fatalf("mirror list after delete %s, want an empty array", e.do(t, "GET", "/v1/mirrors", nil).body)
	}
}

// TestSecretsAreWriteOnly creates a SASL mirror and looks for its password
// everywhere the API, the event log, the outbox and the server log expose.
func TestSecretsAreWriteOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const password = "pa55-W0rd-never-shown"
	const newPassword = "an0ther-S3cret-never-shown"

	r := e.do(t, "POST", "/v1/mirrors?skip_connectivity_check=true", map[string]any{
		"name": "sec", "source": map[string]any{"bootstrap_servers": e.bootstrap,
			"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
			"sasl_username": "alice", "sasl_password": password}})
	var m api.Mirror
	ok(t, r, http.StatusCreated, &m)
	if !m.Source.SASLPasswordSet || m.Source.SASLUsername != "alice" || m.Source.SASLMechanism != "PLAIN" ||
		m.Source.SecurityProtocol != "SASL_PLAINTEXT" {
		t.Fatalf("created %+v", m.Source)
	}
	e.createMirror(t, "plain")
	var created string
	if err := e.pool.QueryRow(t.Context(), `SELECT sasl_password FROM mirrors WHERE name = 'sec'`).Scan(&created); err != nil {
		t.Fatal(err)
	}
	ok(t, e.do(t, "PATCH", "/v1/mirrors/sec?skip_connectivity_check=true", map[string]any{
		"source": map[string]any{"sasl_password": newPassword}}), http.StatusOK, &m)
	if !m.Source.SASLPasswordSet {
		t.Fatalf("patched source %+v: sasl_password_set false", m.Source)
	}
	// Stored sealed under the server's key (TestSecretsAtRest opens it).
	var stored string
	if err := e.pool.QueryRow(t.Context(), `SELECT sasl_password FROM mirrors WHERE name = 'sec'`).Scan(&stored); err != nil ||
		!secretbox.Sealed(stored) || stored == created {
		t.Fatalf("stored password %q, %v: the patch must replace it, sealed", stored, err)
	}

	exposed := map[string]string{"create response": string(r.body)}
	for _, path := range []string{"/v1/mirrors/sec", "/v1/mirrors", "/v1/partitions"} {
		resp := e.do(t, "GET", path, nil)
		ok(t, resp, http.StatusOK, nil)
		exposed["GET "+path] = string(resp.body)
	}
	var sm api.Mirror
	ok(t, e.do(t, "GET", "/v1/mirrors/sec", nil), http.StatusOK, &sm)
	if !sm.Source.SASLPasswordSet {
		t.Fatal("GET: sasl_password_set false")
	}
	for name, sql := range map[string]string{
		"events":       `SELECT coalesce(string_agg(e::text, E'\n'), '') FROM events e`,
		"outbox":       `SELECT coalesce(string_agg(o::text, E'\n'), '') FROM outbox o`,
		"outbox value": `SELECT coalesce(string_agg(value::text, E'\n'), '') FROM outbox WHERE mirror = 'sec'`,
	} {
		var text string
		if err := e.pool.QueryRow(t.Context(), sql).Scan(&text); err != nil {
			t.Fatal(err)
		}
		exposed[name] = text
	}
	if !strings.Contains(exposed["outbox value"], `"sasl_password_set": true`) {
		t.Fatalf("outbox value %s should say the password is set", exposed["outbox value"])
	}
	exposed["server log"] = e.logs.String()
	for where, text := range exposed {
		for _, secret := range []string{password, newPassword} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains the SASL password: %s", where, text)
			}
		}
		if where != "server log" && strings.Contains(text, `"sasl_password"`) {
			t.Errorf("%s has a sasl_password field: %s", where, text)
		}
	}
}

// TestCreateMirrorSourceChecks covers the connectivity check and its two
// escape hatches, dry_run and skip_connectivity_check.
func TestCreateMirrorSourceChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := func(name, bootstrap string) map[string]any {
		return map[string]any{"name": name, "source": map[string]any{"bootstrap_servers": bootstrap}}
	}

	t.Run("unreachable source", func(t *testing.T) {
		before := e.snapshot(t)
		wantProblem(t, e.do(t, "POST", "/v1/mirrors", body("down", unreachable)),
			http.StatusServiceUnavailable, "source-unavailable", unreachable)
		e.unchanged(t, before)
	})

	t.Run("unreachable source is no server error", func(t *testing.T) {
		// The 503 names the source the caller gave: the caller's to fix,
		// so the server logs it at WARN, not ERROR.
		e := newEnv(t)
		wantProblem(t, e.do(t, "POST", "/v1/mirrors", body("down", unreachable)),
			http.StatusServiceUnavailable, "source-unavailable", unreachable)
		logs := e.logs.String()
		warned := slices.ContainsFunc(strings.Split(logs, "\n"), func(l string) bool {
			return strings.Contains(l, `level=WARN msg="http request"`) && strings.Contains(l, "status=503")
		})
		if strings.Contains(logs, "level=ERROR") || !warned {
			t.Fatalf("want the 503 logged at WARN and no ERROR:\n%s", logs)
		}
	})

	t.Run("dry run", func(t *testing.T) {
		before := e.snapshot(t)
		r := e.do(t, "POST", "/v1/mirrors?dry_run=true", body("dry", e.bootstrap))
		var m api.Mirror
		ok(t, r, http.StatusOK, &m)
		if m.Name != "dry" || m.Source.BootstrapServers != e.bootstrap {
			t.Fatalf("dry-run result %+v", m)
		}
		if loc := r.header.Get("Location"); loc != "" {
			t.Fatalf("dry run has Location %q", loc)
		}
		e.unchanged(t, before)
		wantProblem(t, e.do(t, "GET", "/v1/mirrors/dry", nil), 404, "not-found")
	})

	t.Run("dry run still checks the source", func(t *testing.T) {
		before := e.snapshot(t)
		wantProblem(t, e.do(t, "POST", "/v1/mirrors?dry_run=true", body("dry", unreachable)),
			http.StatusServiceUnavailable, "source-unavailable", unreachable)
		e.unchanged(t, before)
	})

	t.Run("skip connectivity check", func(t *testing.T) {
		before := e.snapshot(t)
		var m api.Mirror
		ok(t, e.do(t, "POST", "/v1/mirrors?skip_connectivity_check=true", body("offline", unreachable)), http.StatusCreated, &m)
		if m.Source.BootstrapServers != unreachable {
			t.Fatalf("created %+v", m)
		}
		e.grew(t, before, map[string]int64{"mirrors": 1, "events": 1, "outbox": 1})

		// Adding topics needs the source: refused, nothing written.
		before = e.snapshot(t)
		wantProblem(t, e.do(t, "POST", "/v1/mirrors/offline/topics:add", map[string]any{"topic": "orders"}),
			http.StatusServiceUnavailable, "source-unavailable", unreachable)
		e.unchanged(t, before)

		// Pointing it at a source that answers goes through the check.
		ok(t, e.do(t, "PATCH", "/v1/mirrors/offline", map[string]any{
			"source": map[string]any{"bootstrap_servers": e.bootstrap}}), http.StatusOK, &m)
		if m.Source.BootstrapServers != e.bootstrap {
			t.Fatalf("patched %+v", m)
		}
		e.topicsAction(t, "offline", "add", "orders")
	})

	t.Run("patch to an unreachable source", func(t *testing.T) {
		e.createMirror(t, "up")
		before := e.snapshot(t)
		wantProblem(t, e.do(t, "PATCH", "/v1/mirrors/up", map[string]any{
			"source": map[string]any{"bootstrap_servers": unreachable}}),
			http.StatusServiceUnavailable, "source-unavailable", unreachable)
		e.unchanged(t, before)
	})
}

// TestUnknownMirror checks every mirror-scoped endpoint answers 404 for a
// mirror that does not exist, and writes nothing.
func TestUnknownMirror(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders")
	before := e.snapshot(t)
	topic := map[string]any{"topic": "orders"}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/mirrors/nope", nil},
		{"PATCH", "/v1/mirrors/nope", map[string]any{"config": map[string]any{"topics.include": "x"}}},
		{"PATCH", "/v1/mirrors/nope?skip_connectivity_check=true", map[string]any{}},
		{"DELETE", "/v1/mirrors/nope", nil},
		{"POST", "/v1/mirrors/nope/topics:add", topic},
		{"POST", "/v1/mirrors/nope/topics:pause", topic},
		{"POST", "/v1/mirrors/nope/topics:resume", topic},
		{"POST", "/v1/mirrors/nope/topics:remove", topic},
		{"GET", "/v1/mirrors/nope/topics", nil},
		{"GET", "/v1/mirrors/nope/topics/orders", nil},
		{"GET", "/v1/mirrors/nope/topics/orders/partitions/0/translate?source_offset=0", nil},
		{"GET", "/v1/partitions?mirror=nope", nil},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			wantProblem(t, e.do(t, c.method, c.path, c.body), http.StatusNotFound, "not-found", "mirror nope does not exist")
			e.unchanged(t, before)
		})
	}

	// Patterns that match none of the mirror's topics.
	e.createMirror(t, "empty")
	before = e.snapshot(t)
	for _, c := range []struct{ mirror, action, pattern string }{
		{"m1", "pause", "payments"},
		{"m1", "resume", "ord"},
		{"m1", "remove", "orders.+"},
		{"empty", "pause", ".*"},
		{"m1", "add", "nothing|nowhere"},
	} {
		t.Run(c.action+" no match on "+c.mirror, func(t *testing.T) {
			wantProblem(t, e.do(t, "POST", "/v1/mirrors/"+c.mirror+"/topics:"+c.action, map[string]any{"topic": c.pattern}),
				http.StatusNotFound, "no-match", c.mirror, `"`+c.pattern+`"`)
			e.unchanged(t, before)
		})
	}
}

func partitionKeys(l api.PartitionList) []string {
	var out []string
	for _, p := range l.Partitions {
		out = append(out, p.Topic+"/"+strconv.Itoa(int(p.Partition)))
	}
	return out
}

// wantTopics checks a conflict problem's topics array, as
// "topic=desired_state" or "topic@mirrored_by".
func wantTopics(t *testing.T, p api.Problem, want ...string) {
	t.Helper()
	var got []string
	for _, ts := range p.Topics {
		if ts.MirroredBy != "" {
			got = append(got, ts.Topic+"@"+ts.MirroredBy)
			continue
		}
		got = append(got, ts.Topic+"="+string(ts.DesiredState))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("problem topics %v, want %v", got, want)
	}
}

// lastEvent checks the newest event's kind and mirror.
func (e *env) lastEvent(t *testing.T, kind, mirror string) {
	t.Helper()
	var k, m, msg string
	if err := e.pool.QueryRow(t.Context(), `SELECT kind, coalesce(mirror, ''), message FROM events ORDER BY id DESC LIMIT 1`).
		Scan(&k, &m, &msg); err != nil {
		t.Fatal(err)
	}
	if k != kind || m != mirror || msg == "" {
		t.Fatalf("last event %s/%s %q, want kind %s for mirror %s", k, m, msg, kind, mirror)
	}
}

// lastOutbox checks the newest outbox row's key and whether it has a value.
func (e *env) lastOutbox(t *testing.T, key string, hasValue bool) {
	t.Helper()
	var k string
	var isValue bool
	if err := e.pool.QueryRow(t.Context(), `SELECT key, value IS NOT NULL FROM outbox ORDER BY id DESC LIMIT 1`).
		Scan(&k, &isValue); err != nil {
		t.Fatal(err)
	}
	if k != key || isValue != hasValue {
		t.Fatalf("last outbox row %s (value %v), want %s (value %v)", k, isValue, key, hasValue)
	}
}

// TestSASLSource checks the stored credentials are the ones used: a source
// that requires SASL/PLAIN refuses a wrong password (503, nothing written)
// and serves the right one, both for the create check and for topics:add.
func TestSASLSource(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	secure, err := kfake.NewCluster(kfake.SeedTopics(2, "secure"), kfake.EnableSASL(), kfake.Superuser("PLAIN", "alice", "right-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(secure.Close)
	addrs := secure.ListenAddrs()
	body := func(password string) map[string]any {
		return map[string]any{"name": "sasl", "source": map[string]any{"bootstrap_servers": strings.Join(addrs, ","),
			"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_username": "alice", "sasl_password": password}}
	}

	before := e.snapshot(t)
	p := wantProblem(t, e.do(t, "POST", "/v1/mirrors", body("wrong-pw")), http.StatusServiceUnavailable, "source-unavailable", addrs[0])
	if strings.Contains(p.Detail, "wrong-pw") {
		t.Fatalf("detail echoes the password: %s", p.Detail)
	}
	e.unchanged(t, before)

	ok(t, e.do(t, "POST", "/v1/mirrors", body("right-pw")), http.StatusCreated, nil)
	if res := e.topicsAction(t, "sasl", "add", ".*"); !slices.Equal(res.Topics, []string{"secure"}) {
		t.Fatalf("added %v, want [secure]", res.Topics)
	}
	if n := e.count(t, `SELECT count(*) FROM mirror_partitions WHERE mirror = 'sasl'`); n != 2 {
		t.Fatalf("%d partition rows, want 2", n)
	}
}

// TestConcurrentWrites races identical writes: exactly one wins, the others
// are conflicts, never errors or duplicates.
func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 4
	race := func(method, path string, body any) map[int]int {
		statuses := make(chan int, n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { statuses <- e.do(t, method, path, body).status })
		}
		wg.Wait()
		close(statuses)
		counts := map[int]int{}
		for s := range statuses {
			counts[s]++
		}
		return counts
	}

	got := race("POST", "/v1/mirrors", map[string]any{"name": "m1", "source": map[string]any{"bootstrap_servers": e.bootstrap}})
	if got[http.StatusCreated] != 1 || got[http.StatusConflict] != n-1 {
		t.Fatalf("concurrent creates: statuses %v, want one 201 and %d 409", got, n-1)
	}
	got = race("POST", "/v1/mirrors/m1/topics:add", map[string]any{"topic": "orders"})
	if got[http.StatusOK] != 1 || got[http.StatusConflict] != n-1 {
		t.Fatalf("concurrent adds: statuses %v, want one 200 and %d 409", got, n-1)
	}
	got = race("POST", "/v1/mirrors/m1/topics:pause", map[string]any{"topic": "orders"})
	if got[http.StatusOK] != 1 || got[http.StatusConflict] != n-1 {
		t.Fatalf("concurrent pauses: statuses %v, want one 200 and %d 409", got, n-1)
	}
	// One event per successful action, and one outbox row per topic.
	if ev, ob := e.count(t, `SELECT count(*) FROM events`), e.count(t, `SELECT count(*) FROM outbox`); ev != 3 || ob != 3 {
		t.Fatalf("events %d outbox %d, want 3 and 3", ev, ob)
	}
}

// TestDeleteWaitsForStoppedPartitions: removal sets the desired state, but
// delete also waits until no partition is in a state other than STOPPED.
func TestDeleteWaitsForStoppedPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "payments")
	e.topicsAction(t, "m1", "remove", "payments")
	// A worker is still stopping the partition.
	if _, err := e.pool.Exec(t.Context(), `UPDATE mirror_partitions SET state = 'STOPPING' WHERE mirror = 'm1'`); err != nil {
		t.Fatal(err)
	}
	before := e.snapshot(t)
	wantProblem(t, e.do(t, "DELETE", "/v1/mirrors/m1", nil), http.StatusConflict, "conflict", "1 removed topic(s) STOPPING", "STOPPED", "wait=30s")
	e.unchanged(t, before)
	wantProblem(t, e.do(t, "DELETE", "/v1/mirrors/m1?wait=forever", nil), http.StatusBadRequest, "validation", "wait")
	e.unchanged(t, before)
	if _, err := e.pool.Exec(t.Context(), `UPDATE mirror_partitions SET state = 'STOPPED' WHERE mirror = 'm1'`); err != nil {
		t.Fatal(err)
	}
	ok(t, e.do(t, "DELETE", "/v1/mirrors/m1", nil), http.StatusNoContent, nil)
	e.grew(t, before, map[string]int64{"mirrors": -1, "mirror_topics": -1, "mirror_partitions": -1, "events": 1, "outbox": 3})
}

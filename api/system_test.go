package api_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"kmirror/api"
	"kmirror/openapi"
	"kmirror/openapi/client"
	"kmirror/service"
)

func TestHealthReadyMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		ok(t, e.do(t, "GET", path, nil), http.StatusOK, nil)
	}
	ok(t, e.do(t, "GET", "/v1/mirrors", nil), http.StatusOK, nil)
	r := e.do(t, "GET", "/metrics", nil)
	if r.status != http.StatusOK {
		t.Fatalf("/metrics: %s", r)
	}
	for _, want := range []string{
		`kmirror_http_requests_total{method="GET",route="/healthz",status="200"} 1`,
		`kmirror_http_requests_total{method="GET",route="/v1/mirrors",status="200"} 1`,
		"kmirror_http_request_duration_seconds_bucket",
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Raw paths never become label values: routes are patterns.
	wantProblem(t, e.do(t, "GET", "/v1/mirrors/some-name", nil), 404, "not-found")
	r = e.do(t, "GET", "/metrics", nil)
	if strings.Contains(string(r.body), "some-name") || !strings.Contains(string(r.body), `route="/v1/mirrors/{mirror}"`) {
		t.Errorf("/metrics labels by raw path or lacks the route pattern:\n%s", r.body)
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wantProblem(t, e.do(t, "GET", "/v1/nothing-here", nil), http.StatusNotFound, "not-found", "no route for GET /v1/nothing-here")
	wantProblem(t, e.do(t, "GET", "/", nil), http.StatusNotFound, "not-found")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:explode", map[string]any{"topic": "x"}), http.StatusNotFound, "not-found")
	wantProblem(t, e.do(t, "PUT", "/v1/mirrors", "{}"), http.StatusMethodNotAllowed, "method-not-allowed", "method PUT is not allowed on /v1/mirrors")
	wantProblem(t, e.do(t, "DELETE", "/v1/mirrors", nil), http.StatusMethodNotAllowed, "method-not-allowed")
	wantProblem(t, e.do(t, "GET", "/v1/mirrors/m1/topics:add", nil), http.StatusMethodNotAllowed, "method-not-allowed")
	wantProblem(t, e.do(t, "POST", "/healthz", nil), http.StatusMethodNotAllowed, "method-not-allowed")
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	generated := regexp.MustCompile(`^[0-9a-f]{16}$`)

	r := e.do(t, "GET", "/healthz", nil)
	if id := r.header.Get("X-Request-Id"); !generated.MatchString(id) {
		t.Fatalf("generated X-Request-Id %q", id)
	}
	if r2 := e.do(t, "GET", "/healthz", nil); r2.header.Get("X-Request-Id") == r.header.Get("X-Request-Id") {
		t.Fatal("two requests got the same generated id")
	}

	r = e.do(t, "GET", "/healthz", nil, "X-Request-Id", "client-id.42:abc")
	if id := r.header.Get("X-Request-Id"); id != "client-id.42:abc" {
		t.Fatalf("X-Request-Id %q, want the client's echoed", id)
	}

	r = e.do(t, "GET", "/v1/mirrors/nope", nil, "X-Request-Id", "trace-7")
	if p := wantProblem(t, r, 404, "not-found"); p.RequestID != "trace-7" || p.Instance != "/v1/mirrors/nope" {
		t.Fatalf("problem %+v: want request_id trace-7 and instance /v1/mirrors/nope", p)
	}
	if !strings.Contains(e.logs.String(), "request_id=trace-7") {
		t.Error("server log does not carry the request id")
	}

	// An id that could inject into logs or headers is replaced.
	for _, bad := range []string{"has space", strings.Repeat("x", 129), "a\tb"} {
		r = e.do(t, "GET", "/healthz", nil, "X-Request-Id", bad)
		if id := r.header.Get("X-Request-Id"); !generated.MatchString(id) {
			t.Fatalf("X-Request-Id for %q = %q, want a generated one", bad, id)
		}
	}
}

// TestEventStream reads the server-sent events of a created mirror.
func TestEventStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders")

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/events?since=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %q", resp.StatusCode, ct)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Fatal("event stream has no X-Request-Id")
	}

	// Each message is id, event and data lines, then a blank line.
	type message struct{ id, event, data string }
	var msgs []message
	var cur message
	sc := bufio.NewScanner(resp.Body)
	for len(msgs) < 2 && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" {
				msgs = append(msgs, cur)
			}
			cur = message{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		}
	}
	if len(msgs) < 2 {
		t.Fatalf("stream ended after %v: %v (context: %v)", msgs, sc.Err(), ctx.Err())
	}
	cancel()
	if msgs[0].event != "mirror.created" || msgs[0].id != "1" || msgs[1].event != "topics.added" || msgs[1].id != "2" {
		t.Fatalf("events %+v, want mirror.created (1) then topics.added (2)", msgs)
	}
	var ev api.PlainEvent
	if err := json.Unmarshal([]byte(msgs[0].data), &ev); err != nil {
		t.Fatalf("event data %q: %v", msgs[0].data, err)
	}
	if ev.ID != 1 || ev.Kind != "mirror.created" || ev.Mirror != "m1" || !strings.Contains(ev.Message, "m1") {
		t.Fatalf("event %+v", ev)
	}

	wantProblem(t, e.do(t, "GET", "/v1/events?since=abc", nil), 400, "validation", `"abc"`)
	wantProblem(t, e.do(t, "GET", "/v1/events", nil, "Last-Event-ID", "-4"), 400, "validation", `"-4"`)
}

// TestEventStreamSeesNewEvents starts a stream after the existing events and
// checks that a change made afterwards arrives on it.
func TestEventStreamSeesNewEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/events?mirror=m2", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Last-Event-ID", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	e.createMirror(t, "m1b") // filtered out: another mirror
	e.createMirror(t, "m2")
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if ev, found := strings.CutPrefix(sc.Text(), "event: "); found {
			events = append(events, ev)
		}
		if id, found := strings.CutPrefix(sc.Text(), "id: "); found && id != "3" {
			t.Fatalf("event id %s, want only 3 (mirror m2's)", id)
		}
		if len(events) == 1 {
			break
		}
	}
	cancel()
	if !slices.Equal(events, []string{"mirror.created"}) {
		t.Fatalf("events %v (scan error %v)", events, sc.Err())
	}
}

func TestInstancesAndDocs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// i1's session is live; i2 runs only the control plane; i3's expired.
	if _, err := e.pool.Exec(t.Context(), `INSERT INTO instances (id, hostname, version, takes_leases, session_epoch,
		session_expires_at, session_renewed_at) VALUES
		('i1', 'h', 'v1', true, 1, now() + interval '1 minute', now()),
		('i2', 'h', 'v1', false, 1, now() + interval '1 minute', now()),
		('i3', 'h', 'v1', true, 1, now() - interval '1 second', now() - interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	var l api.InstanceList
	ok(t, e.do(t, "GET", "/v1/instances", nil), http.StatusOK, &l)
	if len(l.Instances) != 3 || l.Instances[0].ID != "i1" || !l.Instances[0].Live || !l.Instances[0].TakesLeases ||
		!l.Instances[1].Live || l.Instances[1].TakesLeases || l.Instances[2].Live {
		t.Fatalf("instances %+v", l)
	}
	// No document is wired in this handler: a clear 404, not an empty 200.
	wantProblem(t, e.do(t, "GET", "/openapi.json", nil), 404, "not-found", "OpenAPI")
}

// TestDocs: the document is served at /openapi.json and, for the docs
// page's own look-up, at /docs/doc.json; /docs redirects to the page.
func TestDocs(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{openAPI: openapi.JSON})
	for _, path := range []string{"/openapi.json", "/docs/doc.json"} {
		r := e.do(t, "GET", path, nil)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" || !bytes.Equal(r.body, openapi.JSON) {
			t.Errorf("%s: %d %s, %d bytes; want the document", path, r.status, r.header.Get("Content-Type"), len(r.body))
		}
	}
	r := e.do(t, "GET", "/docs/index.html", nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "swagger-ui-bundle.js") {
		t.Errorf("/docs/index.html: %d %.200s", r.status, r.body)
	}
	if r := e.do(t, "GET", "/docs/swagger-initializer.js", nil); r.status != http.StatusOK || !strings.Contains(string(r.body), `url: "/openapi.json"`) {
		t.Errorf("/docs/swagger-initializer.js: %d %.200s; want it to load /openapi.json", r.status, r.body)
	}
	if r := e.do(t, "GET", "/docs/swagger-ui-bundle.js", nil); r.status != http.StatusOK || len(r.body) < 100_000 {
		t.Errorf("/docs/swagger-ui-bundle.js: %d, %d bytes", r.status, len(r.body))
	}
	wantProblem(t, e.do(t, "GET", "/docs/nope.js", nil), http.StatusNotFound, "not-found", "docs page")
}

func TestReadyzDatabaseDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ok(t, e.do(t, "GET", "/readyz", nil), http.StatusOK, nil)
	e.pool.Close()
	wantProblem(t, e.do(t, "GET", "/readyz", nil), http.StatusServiceUnavailable, "database-unavailable", "database unavailable")
	ok(t, e.do(t, "GET", "/healthz", nil), http.StatusOK, nil)
}

// sseMessage is one server-sent event as the stream frames it.
type sseMessage struct{ id, event, data string }

// readSSE reads n messages (comments and keep-alives skipped) from a stream
// opened with the given query and Last-Event-ID ("" for none), calling each
// of then once the stream is open.
func readSSE(t *testing.T, e *env, query, lastEventID string, n int, then ...func()) []sseMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	if e.streamToken != "" {
		req.Header.Set("Authorization", "Bearer "+e.streamToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	for _, f := range then {
		f()
	}
	var msgs []sseMessage
	var cur sseMessage
	sc := bufio.NewScanner(resp.Body)
	for len(msgs) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" {
				msgs = append(msgs, cur)
			}
			cur = sseMessage{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		}
	}
	if len(msgs) < n {
		t.Fatalf("stream ended after %d of %d messages %+v: %v (context: %v)", len(msgs), n, msgs, sc.Err(), ctx.Err())
	}
	return msgs
}

// TestEventStreamTypedStateEvents: a partition state change arrives on the
// stream with from, to, reason, epoch and owner as fields of its data, and
// its human message; a failure carries its error. A takeover and an in-place
// re-alignment carry theirs.
func TestEventStreamTypedStateEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders")
	if tag, err := e.pool.Exec(t.Context(), `UPDATE mirror_partitions SET lease_owner = 'kmirror-0', lease_epoch = 7, lease_session = 1
		WHERE mirror = 'm1' AND topic = 'orders' AND partition = 1`); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("lease the partition: %v (%d rows)", err, tag.RowsAffected())
	}
	for _, tr := range []service.PartitionTransition{
		{From: service.StateUnknown, To: service.StatePreparing, Reason: "lease acquired"},
		{From: service.StatePreparing, To: service.StateFailed, Error: "destination unreachable", Retryable: true},
	} {
		tr.Mirror, tr.Topic, tr.Partition, tr.Owner, tr.Epoch = "m1", "orders", 1, "kmirror-0", 7
		if _, err := e.workers.TransitionPartition(t.Context(), tr); err != nil {
			t.Fatalf("%s → %s: %v", tr.From, tr.To, err)
		}
	}

	// Partition 2: a new owner takes it over, then it re-aligns in place.
	if _, err := e.pool.Exec(t.Context(), `UPDATE mirror_partitions SET lease_owner = 'kmirror-1', lease_epoch = 8, lease_session = 1
		WHERE mirror = 'm1' AND topic = 'orders' AND partition = 2`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.workers.TransitionPartition(t.Context(), service.PartitionTransition{Mirror: "m1", Topic: "orders",
		Partition: 2, Owner: "kmirror-1", Epoch: 8, From: service.StateUnknown, To: service.StatePreparing}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []service.PartitionRealignment{
		{Takeover: true, Previous: "kmirror-0", Summary: "resumed at the checkpoint"},
		{Cause: "records removed by retention", Summary: "skipped 5", LostRecordsAdd: 5},
	} {
		r.Mirror, r.Topic, r.Partition, r.Owner, r.Epoch, r.State = "m1", "orders", 2, "kmirror-1", 8, service.StatePreparing
		if _, err := e.workers.RecordRealignment(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}

	var got []api.PartitionStateEvent
	var owner api.PartitionOwnerEvent
	var realigned api.PartitionRealignedEvent
	for _, m := range readSSE(t, e, "?since=0", "", 7) {
		var head struct {
			ID   int64  `json:"id"`
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal([]byte(m.data), &head); err != nil {
			t.Fatalf("event data %q: %v", m.data, err)
		}
		if m.event != head.Kind || m.id != strconv.FormatInt(head.ID, 10) {
			t.Fatalf("message %+v does not match its data", m)
		}
		// The generated Go client picks the same shape by the discriminator.
		var ce client.Event
		if err := json.Unmarshal([]byte(m.data), &ce); err != nil {
			t.Fatalf("Go client: event data %q: %v", m.data, err)
		}
		v, err := ce.ValueByDiscriminator()
		wantType := map[string]string{service.EventPartitionState: "client.PartitionStateEvent",
			service.EventPartitionOwner: "client.PartitionOwnerEvent", service.EventPartitionRealigned: "client.PartitionRealignedEvent"}[head.Kind]
		if got := fmt.Sprintf("%T", v); err != nil || got != cmp.Or(wantType, "client.PlainEvent") {
			t.Errorf("Go client: %s event as %s (%v), want %s", head.Kind, got, err, cmp.Or(wantType, "client.PlainEvent"))
		}
		switch head.Kind {
		case service.EventPartitionState:
			var ev api.PartitionStateEvent
			if err = json.Unmarshal([]byte(m.data), &ev); err == nil && *ev.Partition == 1 {
				got = append(got, ev)
			}
		case service.EventPartitionOwner:
			err = json.Unmarshal([]byte(m.data), &owner)
		case service.EventPartitionRealigned:
			err = json.Unmarshal([]byte(m.data), &realigned)
		}
		if err != nil {
			t.Fatalf("event data %q: %v", m.data, err)
		}
	}
	k0, k1 := ptr("kmirror-0"), ptr("kmirror-1")
	if want := (api.PartitionOwnerData{Mirror: "m1", Topic: "orders", DestinationTopic: "orders", Partition: 2, State: "PREPARING",
		Epoch: 8, Owner: k1, PreviousOwner: k0}); !reflect.DeepEqual(owner.Data, want) {
		t.Errorf("partition.owner data %+v, want %+v", owner.Data, want)
	}
	if want := (api.PartitionRealignedData{Mirror: "m1", Topic: "orders", DestinationTopic: "orders", Partition: 2, State: "PREPARING",
		Epoch: 8, Owner: k1, Cause: "records removed by retention"}); !reflect.DeepEqual(realigned.Data, want) {
		t.Errorf("partition.realigned data %+v, want %+v", realigned.Data, want)
	}
	if len(got) != 2 {
		t.Fatalf("state events %+v, want 2", got)
	}
	// Absent values are null: no error on a move that is not to FAILED.
	want := []api.PartitionStateData{
		{Mirror: "m1", Topic: "orders", DestinationTopic: "orders", Partition: 1, From: "UNKNOWN", To: "PREPARING",
			Reason: ptr("lease acquired"), Epoch: 7, Owner: k0},
		{Mirror: "m1", Topic: "orders", DestinationTopic: "orders", Partition: 1, From: "PREPARING", To: "FAILED",
			Reason: ptr("destination unreachable"), Error: ptr("destination unreachable"), Epoch: 7, Owner: k0},
	}
	for i, ev := range got {
		if !reflect.DeepEqual(ev.Data, want[i]) {
			t.Errorf("state event %d data %+v, want %+v", i, ev.Data, want[i])
		}
		if ev.Mirror != "m1" || ev.Topic != "orders" || ev.Partition == nil || *ev.Partition != 1 ||
			!strings.Contains(ev.Message, "orders/1: ") || !strings.Contains(ev.Message, string(want[i].To)) {
			t.Errorf("state event %d: %+v", i, ev)
		}
	}
	// On the wire, a null is written out, not left away.
	if raw := readSSE(t, e, "?since=0", "", 3)[2].data; !strings.Contains(raw, `"error":null`) {
		t.Errorf("first state event %s: want \"error\":null", raw)
	}
}

// TestEventStreamResumesAfterLastEventID: a stream opened with Last-Event-ID
// starts with exactly the event after that id, in order, and Last-Event-ID
// wins over since.
func TestEventStreamResumesAfterLastEventID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, name := range []string{"m1", "m2", "m3", "m4"} {
		e.createMirror(t, name)
	}
	var ids []int64
	if err := func() error {
		rows, err := e.pool.Query(t.Context(), `SELECT id FROM events ORDER BY id`)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	}(); err != nil || len(ids) != 4 {
		t.Fatalf("events in the table %v: %v", ids, err)
	}
	for k := range ids[:3] {
		last := strconv.FormatInt(ids[k], 10)
		msgs := readSSE(t, e, "?since=0", last, 3-k)
		for j, m := range msgs {
			if m.id != strconv.FormatInt(ids[k+1+j], 10) {
				t.Fatalf("after Last-Event-ID %s: message %d has id %s, want the table's %v after it", last, j, m.id, ids[k+1:])
			}
		}
	}
	// Resumed at the newest event, the stream sends the next one when it
	// happens, and nothing before it.
	last := strconv.FormatInt(ids[3], 10)
	msgs := readSSE(t, e, "", last, 1, func() { e.createMirror(t, "m5") })
	if msgs[0].id != strconv.FormatInt(ids[3]+1, 10) || msgs[0].event != "mirror.created" {
		t.Fatalf("after the newest event: %+v", msgs)
	}
}

func ptr[T any](v T) *T { return &v }

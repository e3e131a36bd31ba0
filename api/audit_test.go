package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"kmirror/api"
)

// TestAuditTrail: every change records its actor (the token's name, never
// the token), the client's address and the request id: in the events
// table, on /v1/events (which ?actor= filters) and in the request's log
// line. Events the workers record have no actor.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{tokens: api.Tokens{File: []api.Token{
		fileToken("ci", api.RoleOperator, "ci-secret"),
		fileToken("ops", api.RoleAdmin, "ops-secret"),
	}}})
	as := func(token, id string) []string {
		return []string{"Authorization", "Bearer " + token, "X-Request-Id", id}
	}
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": "m1", "source": map[string]any{"bootstrap_servers": e.bootstrap}},
		as("ops-secret", "req-create")...), 201, nil)
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add", map[string]any{"topic": "orders"}, as("ci-secret", "req-add")...), 200, nil)
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:pause", map[string]any{"topic": "orders"}, as("ci-secret", "req-pause")...), 200, nil)
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1:sync", nil, as("ci-secret", "req-sync")...), 503, "sync-unavailable")
	ok(t, e.do(t, "PATCH", "/v1/mirrors/m1", map[string]any{"config": map[string]any{"mirror.metadata.refresh.interval.ms": "10000"}},
		as("ops-secret", "req-patch")...), 200, nil)

	rows, err := e.pool.Query(t.Context(), `SELECT kind, coalesce(actor, ''), coalesce(remote_addr, ''), coalesce(request_id, '')
		FROM events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var kind, actor, addr, id string
		if err := rows.Scan(&kind, &actor, &addr, &id); err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.Join([]string{kind, actor, addr, id}, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mirror.created ops 127.0.0.1 req-create",
		"topics.added ci 127.0.0.1 req-add",
		"topics.paused ci 127.0.0.1 req-pause",
		"mirror.sync_requested ci 127.0.0.1 req-sync",
		"mirror.updated ops 127.0.0.1 req-patch",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The stream, filtered by actor, carries the same.
	e.streamToken = "ops-secret"
	msgs := readSSE(t, e, "?since=0&actor=ci", "", 3)
	for i, m := range msgs {
		var ev api.PlainEvent
		if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Actor != "ci" || ev.RemoteAddr != "127.0.0.1" || ev.RequestID != []string{"req-add", "req-pause", "req-sync"}[i] {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}

	logs := e.logs.String()
	for _, want := range []string{"request_id=req-add", "actor=ci", "remote_addr=127.0.0.1"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log has no %s", want)
		}
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "request_id=req-pause") && strings.Contains(line, `msg="http request"`) &&
			(!strings.Contains(line, "actor=ci") || strings.Count(line, "actor=") != 1) {
			t.Errorf("the pause's log line: %s", line)
		}
	}
	if strings.Contains(logs, "-secret") {
		t.Error("a token reached the log")
	}
}

package api_test

import (
	"net/http"
	"reflect"
	"slices"
	"testing"

	"kmirror/api"
)

// TestAddTopicsDryRun: topics:add?dry_run=true resolves and checks like a
// real add, answers the matches and writes nothing: no rows, no events.
func TestAddTopicsDryRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.createMirror(t, "m2")
	both := []api.TopicMatch{{Topic: "orders", DestinationTopic: "orders", Partitions: 3},
		{Topic: "payments", DestinationTopic: "payments", Partitions: 1}}

	before := e.snapshot(t)
	var res api.TopicsResult
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add?dry_run=true", map[string]any{"topic": "payments|orders"}), http.StatusOK, &res)
	if res.Mirror != "m1" || res.Action != "add" || !slices.Equal(res.Topics, []string{"orders", "payments"}) ||
		!reflect.DeepEqual(res.Matches, both) {
		t.Fatalf("dry run: %+v", res)
	}
	e.unchanged(t, before)

	// The errors of a real add, still writing nothing.
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add?dry_run=true", map[string]any{"topic": "(orders"}),
		http.StatusBadRequest, "validation", "topic")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add?dry_run=true", map[string]any{"topic": "nothing.*"}),
		http.StatusNotFound, "no-match")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add?dry_run=maybe", map[string]any{"topic": "orders"}),
		http.StatusBadRequest, "validation", "dry_run")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/nope/topics:add?dry_run=true", map[string]any{"topic": "orders"}),
		http.StatusNotFound, "not-found")
	e.unchanged(t, before)

	// A real add answers its matches too.
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add", map[string]any{"topic": "orders"}), http.StatusOK, &res)
	if !reflect.DeepEqual(res.Matches, both[:1]) {
		t.Fatalf("real add: %+v", res)
	}

	// Conflicts: already mirrored by this mirror, or by another one.
	before = e.snapshot(t)
	p := wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add?dry_run=true", map[string]any{"topic": "orders|payments"}),
		http.StatusConflict, "conflict", "orders is mirroring")
	if len(p.Topics) != 1 || p.Topics[0].Topic != "orders" {
		t.Fatalf("conflict topics %+v", p.Topics)
	}
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m2/topics:add?dry_run=true", map[string]any{"topic": "orders"}),
		http.StatusConflict, "conflict", "orders is mirrored by mirror m1")
	e.unchanged(t, before)

	// A stopped topic may be restarted: the dry run says so.
	e.topicsAction(t, "m1", "remove", "orders")
	before = e.snapshot(t)
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add?dry_run=true", map[string]any{"topic": "orders"}), http.StatusOK, &res)
	if !slices.Equal(res.Topics, []string{"orders"}) || e.desiredState(t, "m1", "orders") != "stopped" {
		t.Fatalf("dry run of a restart: %+v", res)
	}
	e.unchanged(t, before)

	// Other actions carry no matches.
	r := e.do(t, "POST", "/v1/mirrors/m1/topics:add", map[string]any{"topic": "orders"})
	ok(t, r, http.StatusOK, nil)
	r = e.do(t, "POST", "/v1/mirrors/m1/topics:pause", map[string]any{"topic": "orders"})
	ok(t, r, http.StatusOK, &res)
	if res.Matches != nil {
		t.Fatalf("pause result has matches: %s", r.body)
	}
}

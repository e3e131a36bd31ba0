package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"kmirror/api"
	"kmirror/service"
)

// TestEventsOfAnEarlierMirrorOfTheSameName: a mirror deleted and created
// again under its name is a new incarnation. A filter by name serves the
// current one's events only, never the deleted namesake's (a replay from
// since=0 included); incarnation=N serves an earlier one's, its delete
// event included, and incarnation=all every one's.
func TestEventsOfAnEarlierMirrorOfTheSameName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.createMirror(t, "x")
	e.createMirror(t, "other")
	ok(t, e.do(t, "DELETE", "/v1/mirrors/x", nil), http.StatusNoContent, nil)
	cur := e.createMirror(t, "x")
	if old.Incarnation <= 0 || cur.Incarnation <= old.Incarnation {
		t.Fatalf("incarnations %d then %d, want positive and growing", old.Incarnation, cur.Incarnation)
	}
	var got api.Mirror
	ok(t, e.do(t, "GET", "/v1/mirrors/x", nil), http.StatusOK, &got)
	if got.Incarnation != cur.Incarnation {
		t.Fatalf("GET says incarnation %d, create said %d", got.Incarnation, cur.Incarnation)
	}

	type seen struct {
		kind        string
		incarnation int64
	}
	read := func(query string, n int) []seen {
		t.Helper()
		var out []seen
		for _, m := range readSSE(t, e, query, "", n) {
			var h struct {
				Mirror            string `json:"mirror"`
				MirrorIncarnation int64  `json:"mirror_incarnation"`
			}
			if err := json.Unmarshal([]byte(m.data), &h); err != nil {
				t.Fatalf("%s: %v", m.data, err)
			}
			if h.Mirror != "x" {
				t.Fatalf("%s: event of mirror %q: %s", query, h.Mirror, m.data)
			}
			out = append(out, seen{m.event, h.MirrorIncarnation})
		}
		return out
	}
	want := func(query string, got []seen, want ...seen) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: events %v, want %v", query, got, want)
		}
	}
	created, deleted := "mirror.created", "mirror.deleted"
	// Events go out in id order, so one of the old mirror's would come
	// first here.
	q := "?since=0&mirror=x"
	want(q, read(q, 1), seen{created, cur.Incarnation})
	q = fmt.Sprintf("?since=0&mirror=x&incarnation=%d", old.Incarnation)
	want(q, read(q, 2), seen{created, old.Incarnation}, seen{deleted, old.Incarnation})
	q = "?since=0&mirror=x&incarnation=all"
	want(q, read(q, 3), seen{created, old.Incarnation}, seen{deleted, old.Incarnation}, seen{created, cur.Incarnation})

	// What the stream would serve next, had it more: the old incarnation
	// has nothing past its delete, and the current one nothing but its
	// creation.
	for _, c := range []struct {
		f    service.EventsFilter
		want int
	}{
		{service.EventsFilter{Mirror: "x"}, 1},
		{service.EventsFilter{Mirror: "x", Incarnation: old.Incarnation}, 2},
		{service.EventsFilter{Mirror: "x", AllIncarnations: true}, 3},
	} {
		list, err := e.svc.ListEvents(t.Context(), c.f)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != c.want {
			t.Fatalf("%+v: %d events, want %d", c.f, len(list), c.want)
		}
	}

	// After its delete, the name serves the deleted mirror's events: the
	// latest incarnation's.
	ok(t, e.do(t, "DELETE", "/v1/mirrors/x", nil), http.StatusNoContent, nil)
	q = "?since=0&mirror=x"
	want(q, read(q, 2), seen{created, cur.Incarnation}, seen{deleted, cur.Incarnation})

	for _, bad := range []string{"?incarnation=all", "?mirror=x&incarnation=0", "?mirror=x&incarnation=-1", "?mirror=x&incarnation=latest"} {
		wantProblem(t, e.do(t, "GET", "/v1/events"+bad, nil), http.StatusBadRequest, "validation", "incarnation")
	}
}

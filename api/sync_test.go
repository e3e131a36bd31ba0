package api_test

import (
	"net/http"
	"testing"
)

// TestSyncMirrorRouting checks the ":sync" route next to the mirror's own
// routes, with a dotted mirror name, and its problems when nothing runs the
// mirror's sync (this handler runs no workers). A pass that is served is
// tested in workers, where the sync runs.
func TestSyncMirrorRouting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/nope:sync", nil), http.StatusNotFound, "not-found", "mirror nope does not exist")
	const name = "my.mirror-1"
	e.createMirror(t, name)
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/"+name+":sync", nil), http.StatusServiceUnavailable,
		"sync-unavailable", "no kmirror instance runs the metadata sync of mirror "+name)
	if n := e.count(t, `SELECT count(*) FROM events WHERE kind = 'mirror.sync_requested' AND mirror = $1`, name); n != 1 {
		t.Fatalf("%d sync_requested events, want 1", n)
	}
	ok(t, e.do(t, "GET", "/v1/mirrors/"+name, nil), http.StatusOK, nil)
	// Only POST has the action; a GET reads "my.mirror-1:sync" as a name.
	wantProblem(t, e.do(t, "GET", "/v1/mirrors/"+name+":sync", nil), http.StatusNotFound, "not-found",
		"mirror "+name+":sync does not exist")
}

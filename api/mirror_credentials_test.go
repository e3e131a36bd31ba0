package api_test

import (
	"net/http"
	"slices"
	"testing"

	"kmirror/api"
)

// TestMirrorNeedsCredentials: a mirror restored without its secrets shows
// needs_credentials and what is missing; a PATCH that sets something else
// leaves it so, and one that sets the password makes it ready.
func TestMirrorNeedsCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ok(t, e.do(t, "POST", "/v1/mirrors?skip_connectivity_check=true", map[string]any{
		"name": "sec", "source": map[string]any{"bootstrap_servers": "127.0.0.1:1", "security_protocol": "SASL_PLAINTEXT",
			"sasl_mechanism": "PLAIN", "sasl_username": "alice", "sasl_password": "first"}}), http.StatusCreated, nil)
	var m api.Mirror
	ok(t, e.do(t, "GET", "/v1/mirrors/sec", nil), http.StatusOK, &m)
	if m.State != api.MirrorStateReady || m.MissingCredentials == nil || len(m.MissingCredentials) != 0 {
		t.Fatalf("a created mirror: state %q missing %v", m.State, m.MissingCredentials)
	}
	// What kmirror restore leaves: the secret redacted, and recorded as missing.
	if _, err := e.pool.Exec(t.Context(), `UPDATE mirrors SET sasl_password = NULL,
		missing_credentials = '{sasl_password}' WHERE name = 'sec'`); err != nil {
		t.Fatal(err)
	}
	ok(t, e.do(t, "GET", "/v1/mirrors/sec", nil), http.StatusOK, &m)
	if m.State != api.MirrorStateNeedsCredentials || !slices.Equal(m.MissingCredentials, []string{"sasl_password"}) {
		t.Fatalf("a restored mirror: state %q missing %v", m.State, m.MissingCredentials)
	}
	var list api.MirrorList
	ok(t, e.do(t, "GET", "/v1/mirrors", nil), http.StatusOK, &list)
	if len(list.Mirrors) != 1 || list.Mirrors[0].State != api.MirrorStateNeedsCredentials {
		t.Fatalf("list %+v", list.Mirrors)
	}
	// Without the password the source is not valid: the patch is refused
	// and the mirror still needs it.
	wantProblem(t, e.do(t, "PATCH", "/v1/mirrors/sec?skip_connectivity_check=true", map[string]any{
		"config": map[string]any{"topics.include": "orders"}}), http.StatusBadRequest, "validation", "sasl_password")
	ok(t, e.do(t, "PATCH", "/v1/mirrors/sec?skip_connectivity_check=true", map[string]any{
		"source": map[string]any{"sasl_password": "again"}}), http.StatusOK, &m)
	if m.State != api.MirrorStateReady || len(m.MissingCredentials) != 0 || !m.Source.SASLPasswordSet {
		t.Fatalf("after the PATCH: state %q missing %v source %+v", m.State, m.MissingCredentials, m.Source)
	}
	if n := e.count(t, `SELECT count(*) FROM mirrors WHERE missing_credentials <> '{}'`); n != 0 {
		t.Fatalf("%d mirror(s) still need credentials in the database", n)
	}
}

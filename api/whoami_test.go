package api_test

import (
	"net/http"
	"testing"

	"kmirror/api"
)

// TestWhoami: with no tokens everyone is an admin; with tokens the admin
// token is admin, the read token a viewer, and anything else a 401.
func TestWhoami(t *testing.T) {
	t.Parallel()
	var who api.Whoami
	open := newEnv(t)
	ok(t, open.do(t, "GET", "/v1/whoami", nil), http.StatusOK, &who)
	if who != (api.Whoami{AuthEnabled: false, Name: "anonymous", Role: "admin"}) {
		t.Fatalf("no tokens: %+v", who)
	}

	e := newEnvWith(t, envOpts{tokens: api.Tokens{Admin: "admin-secret", Read: "read-secret"}})
	ok(t, e.do(t, "GET", "/v1/whoami", nil, "Authorization", "Bearer admin-secret"), http.StatusOK, &who)
	if who != (api.Whoami{AuthEnabled: true, Name: "api-token", Role: "admin"}) {
		t.Fatalf("admin token: %+v", who)
	}
	ok(t, e.do(t, "GET", "/v1/whoami", nil, "Authorization", "Bearer read-secret"), http.StatusOK, &who)
	if who != (api.Whoami{AuthEnabled: true, Name: "api-read-token", Role: "viewer"}) {
		t.Fatalf("read token: %+v", who)
	}
	wantProblem(t, e.do(t, "GET", "/v1/whoami", nil), http.StatusUnauthorized, "unauthenticated")
	wantProblem(t, e.do(t, "GET", "/v1/whoami", nil, "Authorization", "Bearer wrong"), http.StatusUnauthorized, "unauthenticated")
}

package api_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"kmirror/api"
)

// TestRoles: with tokens, every route but /healthz and /readyz needs one
// (401), and each route needs its role (403 below it): viewer reads,
// operator also acts on topics and syncs, admin also creates, patches and
// deletes mirrors. The environment's tokens are an admin and a viewer.
func TestRoles(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{openAPI: []byte(`{}`), tokens: api.Tokens{Admin: "admin-secret", Read: "read-secret",
		File: []api.Token{
			fileToken("dash", api.RoleViewer, "dash-secret"),
			fileToken("ci", api.RoleOperator, "ci-secret"),
			fileToken("ops", api.RoleAdmin, "ops-secret"),
		}}})
	bearer := func(tok string) []string {
		if tok == "" {
			return nil
		}
		return []string{"Authorization", "Bearer " + tok}
	}
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": "m1", "source": map[string]any{"bootstrap_servers": e.bootstrap}},
		bearer("ops-secret")...), 201, nil)
	topic := `{"topic":"orders"}`
	// need: the lowest role that may call the route; "" for none.
	routes := []struct {
		method, path, body string
		need               api.Role
	}{
		{"GET", "/healthz", "", ""},
		{"GET", "/readyz", "", ""},
		{"GET", "/metrics", "", api.RoleViewer},
		{"GET", "/openapi.json", "", api.RoleViewer},
		{"GET", "/docs/index.html", "", api.RoleViewer},
		{"GET", "/v1/mirrors", "", api.RoleViewer},
		{"GET", "/v1/mirrors/m1", "", api.RoleViewer},
		{"GET", "/v1/mirrors/m1/topics", "", api.RoleViewer},
		{"GET", "/v1/partitions", "", api.RoleViewer},
		{"GET", "/v1/instances", "", api.RoleViewer},
		{"GET", "/v1/history", "", api.RoleViewer},
		{"GET", "/v1/whoami", "", api.RoleViewer},
		{"POST", "/v1/mirrors/m1/topics:add?dry_run=true", topic, api.RoleOperator},
		{"POST", "/v1/mirrors/m1/topics:pause", topic, api.RoleOperator},
		{"POST", "/v1/mirrors/m1/topics:resume", topic, api.RoleOperator},
		{"POST", "/v1/mirrors/m1/topics:remove", topic, api.RoleOperator},
		{"POST", "/v1/mirrors/nope:sync", "", api.RoleOperator},
		{"POST", "/v1/mirrors?dry_run=true", `{"name":"m2","source":{"bootstrap_servers":"` + e.bootstrap + `"}}`, api.RoleAdmin},
		{"PATCH", "/v1/mirrors/nope", `{"config":{}}`, api.RoleAdmin},
		{"DELETE", "/v1/mirrors/nope", "", api.RoleAdmin},
	}
	callers := []struct {
		token string
		role  api.Role
	}{
		{"", ""}, {"wrong", ""}, {"read-secret", api.RoleViewer}, {"dash-secret", api.RoleViewer},
		{"ci-secret", api.RoleOperator}, {"admin-secret", api.RoleAdmin}, {"ops-secret", api.RoleAdmin},
	}
	rank := map[api.Role]int{"": 0, api.RoleViewer: 1, api.RoleOperator: 2, api.RoleAdmin: 3}
	for _, rt := range routes {
		for _, c := range callers {
			var body any
			if rt.body != "" {
				body = rt.body
			}
			r := e.do(t, rt.method, rt.path, body, bearer(c.token)...)
			var want string
			switch {
			case rt.need == "":
				want = "allowed"
			case c.role == "":
				want = "401"
			case rank[c.role] < rank[rt.need]:
				want = "403"
			default:
				want = "allowed"
			}
			got := "allowed"
			if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
				got = strconv.Itoa(r.status)
			}
			if got != want {
				t.Errorf("%s %s as %q (%s): %s, want %s", rt.method, rt.path, c.token, c.role, r, want)
			}
			if strings.Contains(string(r.body), "-secret") {
				t.Errorf("%s %s: a token is echoed: %s", rt.method, rt.path, r.body)
			}
			if got == "403" && !strings.Contains(string(r.body), "needs role "+string(rt.need)) {
				t.Errorf("%s %s: a 403 that does not say which role: %s", rt.method, rt.path, r.body)
			}
		}
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM mirrors`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d mirrors (%v), want only m1", n, err)
	}
	if strings.Contains(e.logs.String(), "-secret") {
		t.Fatal("a token reached the log")
	}
}

// TestPublicMetricsAndDocs: the flags serve /metrics and the docs without
// a token; /v1 still needs one.
func TestPublicMetricsAndDocs(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{openAPI: []byte(`{}`), public: true, tokens: api.Tokens{Admin: "admin-secret"}})
	for _, path := range []string{"/metrics", "/openapi.json", "/docs/index.html"} {
		if r := e.do(t, "GET", path, nil); r.status != 200 {
			t.Errorf("GET %s without a token: %s", path, r)
		}
	}
	wantProblem(t, e.do(t, "GET", "/v1/mirrors", nil), 401, "unauthenticated")
}

// TestTokenNamesAreUnique: the audit trail names a token, so two tokens
// of one name (the environment's included) or one token twice are refused.
func TestTokenNamesAreUnique(t *testing.T) {
	t.Parallel()
	for _, tokens := range []api.Tokens{
		{Admin: "a", File: []api.Token{fileToken("api-token", api.RoleViewer, "b")}},
		{Read: "a", File: []api.Token{fileToken("ci", api.RoleViewer, "a")}},
		{Admin: "a", Read: "a"},
	} {
		if err := tokens.Validate(); err == nil {
			t.Errorf("%+v: accepted", tokens)
		}
	}
	if err := (api.Tokens{Admin: "a", Read: "b", File: []api.Token{fileToken("ci", api.RoleOperator, "c")}}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestTokensFile: the file's lines parse to tokens; a bad line is refused
// with its line number and without echoing a token written by mistake.
func TestTokensFile(t *testing.T) {
	t.Parallel()
	tok, line, err := api.NewToken("ci", api.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "kmt_") || strings.Contains(line, tok) || !strings.HasPrefix(line, "ci operator ") {
		t.Fatalf("token %q, line %q", tok, line)
	}
	got, err := api.ParseTokensFile(strings.NewReader("# kmirror tokens\n\n" + line + "\n\tdash   viewer " + strings.Repeat("ab", 32) + "\n"))
	if err != nil || len(got) != 2 {
		t.Fatalf("%v %v", got, err)
	}
	if got[0] != fileToken("ci", api.RoleOperator, tok) || got[1].Name != "dash" || got[1].Role != api.RoleViewer {
		t.Fatalf("parsed %+v", got)
	}
	for _, bad := range []struct{ file, want string }{
		{"ci operator", "line 1: want NAME ROLE SHA256-HEX"},
		{"ci boss " + strings.Repeat("ab", 32), `role "boss"`},
		{"ci admin kmt_secretsecretsecret", `"kmt_secr…" is not a SHA-256`},
		{"c/i admin " + strings.Repeat("ab", 32), "token name"},
		{line + "\n" + line, "line 2: token name \"ci\" appears twice"},
	} {
		_, err := api.ParseTokensFile(strings.NewReader(bad.file))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.file, err, bad.want)
		}
		if err != nil && strings.Contains(err.Error(), "secretsecret") {
			t.Errorf("error echoes the token: %v", err)
		}
	}
}

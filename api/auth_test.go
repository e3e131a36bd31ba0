package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kmirror/api"
	"kmirror/internal/testdb"
	"kmirror/service"
)

// TestBearerTokens: with tokens configured, /v1 needs one; the read token
// may only read; health and the docs stay open.
func TestBearerTokens(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	svc, err := service.New(service.Config{Pool: pool, Catalog: service.KafkaCatalog(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.NewHandler(api.Config{Service: svc, Pool: pool,
		Tokens: api.Tokens{Admin: "admin-secret", Read: "read-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	do := func(method, path, token string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(
			`{"name":"m1","source":{"bootstrap_servers":"127.0.0.1:1"}}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cases := []struct {
		method, path, token string
		status              int
		problem             string
	}{
		{"GET", "/v1/mirrors", "", 401, "urn:kmirror:problem:unauthenticated"},
		{"GET", "/v1/mirrors", "wrong", 401, "urn:kmirror:problem:unauthenticated"},
		{"GET", "/v1/mirrors", "read-secret", 200, ""},
		{"POST", "/v1/mirrors?skip_connectivity_check=true", "read-secret", 403, "urn:kmirror:problem:forbidden"},
		{"POST", "/v1/mirrors?skip_connectivity_check=true", "admin-secret", 201, ""},
		{"GET", "/healthz", "", 200, ""},
		{"GET", "/docs/index.html", "", 200, ""},
	}
	for _, c := range cases {
		status, body := do(c.method, c.path, c.token)
		if status != c.status || (c.problem != "" && !strings.Contains(body, c.problem)) {
			t.Errorf("%s %s with %q: %d %s, want %d %s", c.method, c.path, c.token, status, body, c.status, c.problem)
		}
		if strings.Contains(body, "-secret") {
			t.Errorf("%s %s: a token is echoed: %s", c.method, c.path, body)
		}
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM mirrors`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d mirrors (%v), want only the admin's", n, err)
	}
}

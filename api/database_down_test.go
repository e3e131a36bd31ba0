package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/api"
	"kmirror/service"
)

// TestDatabaseDownAnswers503: with Postgres unreachable, every /v1 call
// answers 503 problem+json of type database-unavailable (with Retry-After),
// not 500, and within the request deadline; /readyz says not ready.
func TestDatabaseDownAnswers503(t *testing.T) {
	t.Parallel()
	srv, _ := downDatabaseServer(t, "kmirror", "kmirror", nil)

	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/mirrors", ""},
		{"GET", "/v1/mirrors/demo", ""},
		{"GET", "/v1/partitions", ""},
		{"GET", "/v1/instances", ""},
		{"POST", "/v1/mirrors/demo/topics:pause", `{"topic":"orders"}`},
		{"PATCH", "/v1/mirrors/demo", `{"config":{"mirror.metadata.refresh.interval.ms":"10000"}}`},
		{"DELETE", "/v1/mirrors/demo", ""},
	} {
		req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || p.Status != 503 ||
			p.Type != "urn:kmirror:problem:database-unavailable" ||
			resp.Header.Get("Content-Type") != "application/problem+json" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: %d %s %+v (%v)", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), p, err)
		}
		if took := time.Since(start); took > 6*time.Second {
			t.Errorf("%s %s took %s, past the request deadline", c.method, c.path, took)
		}
	}
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz: %d, want 503", resp.StatusCode)
	}
}

// downDatabaseServer serves the API over a pool whose Postgres refuses every
// connection (a port nothing listens on, at the address returned), as user
// to database; a nil log is slog's default.
func downDatabaseServer(t *testing.T, user, database string, log *slog.Logger) (*httptest.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	pool, err := pgxpool.New(context.Background(), "postgres://"+user+"@"+addr+"/"+database+"?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.NewHandler(api.Config{Service: svc, Pool: pool, Logger: log, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, addr
}

package api_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"kmirror/internal/testing/syncbuf"
)

// TestReadyzSaysNothingOfTheDatabase: /readyz answers anyone, so with
// Postgres down its 503 names neither the database's user, its name nor its
// address; it has Retry-After as the API's other 503s do, and the server log
// keeps the details for the operator.
func TestReadyzSaysNothingOfTheDatabase(t *testing.T) {
	t.Parallel()
	const user, database = "readyzuser", "readyzdatabase"
	logs := &syncbuf.Buffer{}
	srv, addr := downDatabaseServer(t, user, database, slog.New(slog.NewTextHandler(logs, nil)))

	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(body), "urn:kmirror:problem:database-unavailable") ||
		!strings.Contains(string(body), "database unavailable") {
		t.Fatalf("/readyz: %d, Retry-After %q, body %s; want 503 database-unavailable with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	_, port, _ := net.SplitHostPort(addr)
	for _, secret := range []string{user, database, addr, port} {
		if strings.Contains(string(body), secret) {
			t.Errorf("/readyz answers %q to anyone: %s", secret, body)
		}
	}
	if l := logs.String(); !strings.Contains(l, "readiness") || !strings.Contains(l, port) {
		t.Errorf("the log does not keep the reason the database did not answer:\n%s", l)
	}
}

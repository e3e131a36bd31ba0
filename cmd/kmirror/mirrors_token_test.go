package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestMirrorsSendsToken: KMIRROR_TOKEN reaches the server as a bearer token.
func TestMirrorsSendsToken(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"mirrors":[{"name":"m1"}]}`))
	}))
	defer srv.Close()
	t.Setenv("KMIRROR_TOKEN", "tok-123")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"mirrors", "--server", srv.URL, "--list"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if got != "Bearer tok-123" || out.String() != "m1\n" {
		t.Fatalf("Authorization %q, output %q", got, out.String())
	}
}

// TestHelpExitsZero: --help prints the flags and is not an error.
func TestHelpExitsZero(t *testing.T) {
	for _, cmd := range []string{"server", "dev", "restore"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{cmd, "--help"}, &out, &errOut); code != 0 || !bytes.Contains(errOut.Bytes(), []byte("Usage of kmirror "+cmd)) {
			t.Errorf("%s --help: exit %d, stderr %q", cmd, code, errOut.String())
		}
	}
}

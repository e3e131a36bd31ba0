package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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

// TestMirrorsTokenFromServerVariable: with only KMIRROR_API_TOKEN set (the
// server's and kmirror dev's variable), the CLI sends it; a 401 names the
// variable the token came from, or the ones the CLI reads.
func TestMirrorsTokenFromServerVariable(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"title":"Unauthorized","status":401,"detail":"this server needs an Authorization: Bearer token"}`))
	}))
	defer srv.Close()
	for _, tc := range []struct{ token, apiToken, sent, hint string }{
		{"", "", "", "set KMIRROR_TOKEN (or KMIRROR_API_TOKEN)"},
		{"", "server-tok", "Bearer server-tok", "refused the token in KMIRROR_API_TOKEN"},
		{"cli-tok", "server-tok", "Bearer cli-tok", "refused the token in KMIRROR_TOKEN"},
	} {
		t.Setenv("KMIRROR_TOKEN", tc.token)
		t.Setenv("KMIRROR_API_TOKEN", tc.apiToken)
		got = ""
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"mirrors", "--server", srv.URL, "--list"}, &out, &errOut)
		if code != 1 || got != tc.sent || !strings.Contains(errOut.String(), tc.hint) {
			t.Errorf("KMIRROR_TOKEN=%q KMIRROR_API_TOKEN=%q: exit %d, sent %q, stderr %q; want %q sent and %q",
				tc.token, tc.apiToken, code, got, errOut.String(), tc.sent, tc.hint)
		}
	}
}

// TestWaitShorterThanTheFirstAnswer: a --wait that runs out before the
// topic list first answers says which topics it never read, not "()".
func TestWaitShorterThanTheFirstAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			_, _ = w.Write([]byte(`{"mirror":"m","action":"pause","topics":["orders"]}`))
			return
		}
		select { // the list answers later than the wait lasts
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
		_, _ = w.Write([]byte(`{"topics":[]}`))
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"mirrors", "--server", srv.URL, "--pause", "--mirror", "m", "--topic", "orders", "--wait", "1ms"}, &out, &errOut)
	if code != 3 || strings.Contains(errOut.String(), "()") || !strings.Contains(errOut.String(), "(orders not read yet)") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 3 naming orders as not read yet", code, out.String(), errOut.String())
	}
}

// TestBadFlagIsOneLine: every command answers a flag it does not know with
// the mistake and how to see help, exit status 2, not its whole usage.
func TestBadFlagIsOneLine(t *testing.T) {
	for _, cmd := range []string{"server", "dev", "restore", "health", "mirrors"} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{cmd, "--bogus"}, &out, &errOut)
		want := "kmirror " + cmd + ": flag provided but not defined: -bogus\nRun 'kmirror " + cmd + " --help' for usage.\n"
		if code != 2 || errOut.String() != want || out.Len() != 0 {
			t.Errorf("%s --bogus: exit %d, stdout %q, stderr %q; want exit 2 and %q", cmd, code, out.String(), errOut.String(), want)
		}
	}
}

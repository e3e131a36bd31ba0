package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"kmirror/internal/testing/syncbuf"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

// TestServerWithoutSecretKey: `kmirror server` without a key refuses a
// source secret over HTTP; with --insecure-store-secrets-in-clear (here its
// environment variable) it stores it as given and warns at start. A keyless
// server whose database holds secrets in clear from before (an upgrade)
// starts, and logs an error naming those mirrors.
func TestServerWithoutSecretKey(t *testing.T) {
	dbURL := testdb.New(t)
	t.Setenv("KMIRROR_DATABASE_URL", dbURL)
	t.Setenv("KMIRROR_SECRET_KEY_FILE", "")
	t.Setenv("KMIRROR_DESTINATION_BOOTSTRAP", "")
	body := func(name string) string {
		return fmt.Sprintf(`{"name":%q,"source":{"bootstrap_servers":"127.0.0.1:1","security_protocol":"SASL_PLAINTEXT",`+
			`"sasl_mechanism":"PLAIN","sasl_username":"u","sasl_password":"pw-%s"}}`, name, name)
	}

	t.Setenv("KMIRROR_INSECURE_STORE_SECRETS_IN_CLEAR", "")
	base, logs := startServerCommand(t)
	if code := postMirror(t, base, body("refused")); code != http.StatusConflict {
		t.Fatalf("a secret on a keyless server: %d, want 409", code)
	}
	if !strings.Contains(logs(), "requests that set a source SASL password or TLS key are refused") {
		t.Errorf("a keyless start does not say secrets are refused:\n%s", logs())
	}

	t.Setenv("KMIRROR_INSECURE_STORE_SECRETS_IN_CLEAR", "true")
	base, logs = startServerCommand(t)
	if code := postMirror(t, base, body("legacy")); code != http.StatusCreated {
		t.Fatalf("with --insecure-store-secrets-in-clear: %d, want 201", code)
	}
	if !strings.Contains(logs(), `"level":"WARN","msg":"--insecure-store-secrets-in-clear`) {
		t.Errorf("no warning at start:\n%s", logs())
	}
	ctx := context.Background()
	pool, err := repo.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if m, err := repo.MirrorsGet(ctx, pool, "legacy"); err != nil || m.SASLPassword != "pw-legacy" {
		t.Fatalf("stored %q, %v: want as given", m.SASLPassword, err)
	}

	// The flag dropped again, as after an upgrade: it starts and says so.
	t.Setenv("KMIRROR_INSECURE_STORE_SECRETS_IN_CLEAR", "")
	_, logs = startServerCommand(t)
	if !strings.Contains(logs(), `"level":"ERROR","msg":"1 mirror(s) hold source secrets in clear in the database (legacy)`) ||
		!strings.Contains(logs(), "kmirror secrets rotate --new-key-file FILE") {
		t.Errorf("a keyless start over secrets in clear does not name them:\n%s", logs())
	}
}

// startServerCommand runs `kmirror server` on a free loopback port as its
// command line would, until the test ends, and returns its base URL and its
// log.
func startServerCommand(t *testing.T) (string, func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"server", "--listen", "127.0.0.1:0"}, &strings.Builder{}, logs) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, line := range strings.Split(logs.String(), "\n") {
			var l struct{ Msg, Listen string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "kmirror server started" {
				return "http://" + l.Listen, logs.String
			}
		}
		select {
		case code := <-done:
			t.Fatalf("server exited with %d:\n%s", code, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start within 30s:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func postMirror(t *testing.T, base, body string) int {
	t.Helper()
	resp, err := http.Post(base+"/v1/mirrors?skip_connectivity_check=true", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

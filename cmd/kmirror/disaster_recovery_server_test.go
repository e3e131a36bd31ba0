package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"kmirror/api"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/testing/testdb"
)

// startDeployment runs a kmirror deployment in this process: a server with
// a database of its own (API, engine, syncer, lease manager and the relay
// that publishes to destination's __mirror_state), writing to the cluster
// at destination. Two of them, on two clusters crossed, are the runbook's
// kmirror-A and kmirror-B. It checks tokens, as every deployment beyond
// loopback does. It returns the API's base URL; the server stops at
// cleanup, and its log is shown when the test failed.
func startDeployment(t *testing.T, name, destination, registry string, tokens api.Tokens) string {
	t.Helper()
	dbURL := testdb.New(t)
	logs := &drLogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	serverErr := make(chan error, 1)
	cfg := serverConfig{
		Listen: "127.0.0.1:0", DatabaseURL: dbURL, InstanceID: name,
		Destination:         kafkaconn.Config{BootstrapServers: []string{destination}},
		DestinationRegistry: &schemaregistry.Config{URLs: []string{registry}},
		LeaseTTL:            inProcessLeaseTTL,
		LeaseRenewInterval:  time.Second,
		DeliveryTimeout:     time.Second,
		SourceTimeout:       2 * time.Second,
		StatePartitions:     3,
		// The test's own checks poll the failover preview, a change as
		// the limiter counts, faster than a token may change things.
		ChangeRate: -1,
		Tokens:     tokens,
		Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Ready:      func(addr string) { ready <- addr },
	}
	go func() { serverErr <- runServer(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-serverErr:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30s", name)
		}
		if t.Failed() {
			t.Logf("%s's log (last 60 lines):\n%s", name, logs.tail(60))
		}
	})
	select {
	case addr := <-ready:
		return "http://" + addr
	case err := <-serverErr:
		t.Fatalf("%s exited early: %v", name, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not become ready within 60s", name)
	}
	return ""
}

// drTokens are the runbook's API tokens: admin for the step that creates
// the mirrors, operator for every other. Both deployments take both.
type drTokens struct {
	admin, operator string
	server          api.Tokens
}

func newDRTokens(t *testing.T) drTokens {
	t.Helper()
	var tk drTokens
	var lines []string
	for _, r := range []struct {
		role  api.Role
		token *string
	}{{api.RoleAdmin, &tk.admin}, {api.RoleOperator, &tk.operator}} {
		token, line, err := api.NewToken("runbook-"+string(r.role), r.role)
		if err != nil {
			t.Fatal(err)
		}
		*r.token, lines = token, append(lines, line)
	}
	file, err := api.ParseTokensFile(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	tk.server = api.Tokens{File: file}
	return tk
}

// drLogBuffer is a log sink the server writes from many goroutines.
type drLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *drLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail returns the last n lines written.
func (b *drLogBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimRight(b.buf.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/devenv/pgserver"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/runtime/secretbox"
)

// devConfig is `kmirror dev`'s flags.
type devConfig struct {
	Listen          string
	SourcePort      int
	DestinationPort int
	RecordsPerSec   int
	LogLevel        string
	// ready, in tests, receives the API's base URL once the demo is set up.
	ready func(baseURL string)
}

func devCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kmirror dev", flag.ContinueOnError)
	var cfg devConfig
	fs.StringVar(&cfg.Listen, "listen", envOr("KMIRROR_LISTEN", "127.0.0.1:8080"), "HTTP listen address")
	fs.IntVar(&cfg.SourcePort, "source-port", 19092, "source cluster port on 127.0.0.1")
	fs.IntVar(&cfg.DestinationPort, "destination-port", 29092, "destination cluster port on 127.0.0.1")
	fs.IntVar(&cfg.RecordsPerSec, "rate", 5, "demo records per second per topic")
	fs.StringVar(&cfg.LogLevel, "log-level", envOr("KMIRROR_LOG_LEVEL", "warn"), "server log level")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	return runDev(ctx, cfg, stdout, stderr)
}

// runDev starts Postgres (unless KMIRROR_DATABASE_URL is set), the two
// in-process clusters with demo traffic, the server and the demo mirror, and
// tears it all down when ctx ends.
func runDev(ctx context.Context, cfg devConfig, stdout, stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	dbURL := os.Getenv("KMIRROR_DATABASE_URL")
	if dbURL == "" {
		fmt.Fprintln(stdout, "Starting a throw-away PostgreSQL ...")
		pg, err := pgserver.Start(ctx, pgserver.Config{Logger: log})
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer func() {
			if err := pg.Stop(); err != nil {
				log.Warn("stopping PostgreSQL failed", "err", err)
			}
		}()
		dbURL = pg.URL("postgres")
	}

	fmt.Fprintln(stdout, "Starting the source and destination Kafka clusters ...")
	clusters, err := devcluster.Start(devcluster.Config{SourcePort: cfg.SourcePort,
		DestinationPort: cfg.DestinationPort, Logger: log})
	if err != nil {
		return fmt.Errorf("start dev clusters (are ports %d and %d free?): %w", cfg.SourcePort, cfg.DestinationPort, err)
	}
	defer clusters.Close()
	// inventory is not added to the demo mirror: a second mirror can take it.
	if err := clusters.StartDemo(ctx, devcluster.Demo{RecordsPerSecond: cfg.RecordsPerSec,
		Topics: map[string]int32{"orders": 3, "payments": 2, "inventory": 1}}); err != nil {
		return err
	}

	// KMIRROR_API_TOKEN and KMIRROR_API_READ_TOKEN protect the dev server
	// as they do a real one; without them it is open, on loopback only
	// (runServer refuses another address).
	tokens, err := loadTokens("")
	if err != nil {
		return err
	}
	secrets, err := devSecretKey(os.Getenv("KMIRROR_DATABASE_URL") != "")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan string, 1)
	serverErr := make(chan error, 1)
	go func() {
		serverErr <- runServer(ctx, serverConfig{
			Listen: cfg.Listen, DatabaseURL: dbURL, InstanceID: "dev",
			Destination:        kafkaconn.Config{BootstrapServers: []string{clusters.DestinationAddr()}},
			LeaseTTL:           15 * time.Second,
			LeaseRenewInterval: 5 * time.Second,
			LeaseOutageGrace:   defaultOutageGrace,
			SourceTimeout:      5 * time.Second,
			Tokens:             tokens,
			Secrets:            secrets,
			Logger:             log,
			Ready:              func(addr string) { ready <- addr },
		})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-serverErr:
		return err
	case <-ctx.Done():
		return nil
	}
	base := "http://" + addr
	if err := setUpDemoMirror(ctx, base, clusters.SourceAddr(), tokens.Admin); err != nil {
		return err
	}
	printDevBanner(stdout, base, clusters.SourceAddr(), clusters.DestinationAddr(), tokens.Enabled())
	if cfg.ready != nil {
		cfg.ready(base)
	}
	select {
	case err := <-serverErr:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "\nStopping ...")
	return <-serverErr
}

// devSecretKey is the key that encrypts the dev server's stored secrets:
// KMIRROR_SECRET_KEY_FILE's when set; else a fresh one for a throw-away
// database, or, for a database that outlives the run (KMIRROR_DATABASE_URL),
// one kept in the user's cache directory so the next run can open them.
func devSecretKey(reused bool) (*secretbox.Keyring, error) {
	if path := os.Getenv("KMIRROR_SECRET_KEY_FILE"); path != "" {
		return secretbox.LoadKeyFile(path)
	}
	if !reused {
		key := make([]byte, secretbox.KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		b, err := secretbox.New(key)
		if err != nil {
			return nil, err
		}
		return secretbox.NewKeyring(b)
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kmirror", "dev-secret-key")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		key, err := secretbox.NewKeyText()
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	return secretbox.LoadKeyFile(path)
}

// setUpDemoMirror creates the mirror demo and adds orders and payments, as
// an operator would with curl; existing ones (a reused database) are kept.
// token is the admin token, when the server has tokens.
func setUpDemoMirror(ctx context.Context, base, source, token string) error {
	steps := []struct{ path, body string }{
		{"/v1/mirrors", fmt.Sprintf(`{"name":"demo","source":{"bootstrap_servers":%q}}`, source)},
		{"/v1/mirrors/demo/topics:add", `{"topic":"orders|payments"}`},
	}
	for _, s := range steps {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+s.path, strings.NewReader(s.body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("set up demo mirror: %w", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 && resp.StatusCode != http.StatusConflict {
			return fmt.Errorf("set up demo mirror: POST %s: %s: %s", s.path, resp.Status, bytes.TrimSpace(body))
		}
	}
	return nil
}

func printDevBanner(w io.Writer, base, source, dest string, auth bool) {
	// With tokens the lines send KMIRROR_API_TOKEN from the shell, never
	// the token itself.
	curl, cli, note := "curl -s", "", ""
	if auth {
		curl = `curl -s -H "Authorization: Bearer $KMIRROR_API_TOKEN"`
		cli = "KMIRROR_TOKEN=$KMIRROR_API_TOKEN "
		note = "\n  The API needs a token: KMIRROR_API_TOKEN (admin) or KMIRROR_API_READ_TOKEN (viewer).\n"
	}
	fmt.Fprintf(w, `
kmirror dev is running. Ctrl-C stops everything and removes the data.
%[4]s
  Web console      %[1]s/
  API and docs     %[1]s/docs
  OpenAPI          %[1]s/openapi.json
  Metrics          %[1]s/metrics
  Source Kafka     %[2]s   (topics orders, payments, inventory; group demo-consumers)
  Destination      %[3]s

Try it:
  %[5]s %[1]s/v1/mirrors/demo/topics
  %[5]s '%[1]s/v1/partitions?mirror=demo'
  %[5]s -X POST -H 'Content-Type: application/json' -d '{"topic":"orders"}' %[1]s/v1/mirrors/demo/topics:pause
  %[5]s -X POST -H 'Content-Type: application/json' -d '{"topic":"orders"}' %[1]s/v1/mirrors/demo/topics:resume
  %[5]s -N %[1]s/v1/events

  %[6]sgo run ./cmd/kmirror mirrors --server %[1]s --describe
  %[6]sgo run ./cmd/kmirror mirrors --server %[1]s --pause --mirror demo --topic orders

  kcat -b %[2]s -L
  kcat -b %[2]s -C -t orders -o -5 -e
  kcat -b %[3]s -C -t orders -o -5 -e
`, base, source, dest, note, curl, cli)
}

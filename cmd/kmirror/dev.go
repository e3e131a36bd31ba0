package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
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
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/runtime/secretbox"

	"github.com/twmb/franz-go/pkg/kfake"
)

// devConfig is `kmirror dev`'s flags.
type devConfig struct {
	Listen          string
	SourcePort      int
	DestinationPort int
	// SourceRegistryPort and DestinationRegistryPort are the two Schema
	// Registries' ports on 127.0.0.1; 0 picks a free one.
	SourceRegistryPort      int
	DestinationRegistryPort int
	RecordsPerSec           int
	// NoDemoMirror leaves the mirror demo out: every source topic is free
	// for a mirror of the operator's own (the DR runbook's, say).
	NoDemoMirror bool
	LogLevel     string
	// ready, in tests, receives the API's base URL once the demo is set up.
	ready func(baseURL string)
}

func devCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kmirror dev", flag.ContinueOnError)
	var cfg devConfig
	fs.StringVar(&cfg.Listen, "listen", envOr("KMIRROR_LISTEN", "127.0.0.1:8080"), "HTTP listen address")
	fs.IntVar(&cfg.SourcePort, "source-port", 19092, "source cluster port on 127.0.0.1")
	fs.IntVar(&cfg.DestinationPort, "destination-port", 29092, "destination cluster port on 127.0.0.1")
	fs.IntVar(&cfg.SourceRegistryPort, "source-registry-port", 18081, "source Schema Registry port on 127.0.0.1")
	fs.IntVar(&cfg.DestinationRegistryPort, "destination-registry-port", 28081, "destination Schema Registry port on 127.0.0.1")
	fs.IntVar(&cfg.RecordsPerSec, "rate", 5, "demo records per second per topic (0: none)")
	fs.BoolVar(&cfg.NoDemoMirror, "no-demo-mirror", false, "do not create the mirror demo, so every source topic is free for mirrors of your own")
	fs.StringVar(&cfg.LogLevel, "log-level", envOr("KMIRROR_LOG_LEVEL", "warn"), "server log level")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	return runDev(ctx, cfg, stdout, stderr)
}

// runDev starts Postgres (unless KMIRROR_DATABASE_URL is set), the two
// in-process clusters with demo traffic, the two in-memory Schema Registries
// with the demo schemas in the source, the server and the demo mirror, and
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
	// The source creates a topic on its first write (kcat -P -t new-topic),
	// as a broker with auto.create.topics.enable does.
	clusters, err := devcluster.Start(devcluster.Config{SourcePort: cfg.SourcePort,
		DestinationPort: cfg.DestinationPort, Logger: log, SourceOpts: []kfake.Opt{kfake.AllowAutoTopicCreation()}})
	if err != nil {
		return fmt.Errorf("start dev clusters (are ports %d and %d free?): %w", cfg.SourcePort, cfg.DestinationPort, err)
	}
	defer clusters.Close()
	// inventory is not added to the demo mirror: a second mirror can take it.
	if err := clusters.StartDemo(ctx, devcluster.Demo{RecordsPerSecond: cfg.RecordsPerSec,
		Topics: map[string]int32{"orders": 3, "payments": 2, "inventory": 1}}); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "Starting the source and destination Schema Registries ...")
	registries, err := startDevRegistries(cfg.SourceRegistryPort, cfg.DestinationRegistryPort)
	if err != nil {
		return err
	}
	defer registries.Close()

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
			Destination:         kafkaconn.Config{BootstrapServers: []string{clusters.DestinationAddr()}},
			DestinationRegistry: &schemaregistry.Config{URLs: []string{registries.destination.URL()}},
			LeaseTTL:            15 * time.Second,
			LeaseRenewInterval:  5 * time.Second,
			LeaseOutageGrace:    defaultOutageGrace,
			SourceTimeout:       5 * time.Second,
			Tokens:              tokens,
			Secrets:             secrets,
			Logger:              log,
			Ready:               func(addr string) { ready <- addr },
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
	if !cfg.NoDemoMirror {
		if err := setUpDemoMirror(ctx, base, clusters.SourceAddr(), registries.source.URL(), tokens.Admin); err != nil {
			return err
		}
	}
	printDevBanner(stdout, devBanner{base: base, source: clusters.SourceAddr(), destination: clusters.DestinationAddr(),
		sourceRegistry: registries.source.URL(), destinationRegistry: registries.destination.URL(), auth: tokens.Enabled(),
		noDemoMirror: cfg.NoDemoMirror, rate: cfg.RecordsPerSec})
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

// setUpDemoMirror creates the mirror demo, its source naming the source
// Schema Registry, and adds orders and payments, as an operator would with
// curl; existing ones (a reused database) are kept. token is the admin token,
// when the server has tokens.
func setUpDemoMirror(ctx context.Context, base, source, registry, token string) error {
	status, body, err := devPost(ctx, base, "/v1/mirrors", demoMirrorBody(source, registry), token)
	if err == nil {
		err = devStepError("/v1/mirrors", status, body)
	}
	if err != nil {
		return err
	}
	status, body, err = devPost(ctx, base, "/v1/mirrors/demo/topics:add", `{"topic":"orders|payments"}`, token)
	if err == nil {
		err = devStepError("/v1/mirrors/demo/topics:add", status, body)
	}
	return err
}

// demoMirrorBody is the demo mirror's POST /v1/mirrors body; registry, when
// set, is its source Schema Registry.
func demoMirrorBody(source, registry string) string {
	type registrySpec struct {
		URLs []string `json:"urls"`
	}
	spec := struct {
		Name   string `json:"name"`
		Source struct {
			BootstrapServers string        `json:"bootstrap_servers"`
			SchemaRegistry   *registrySpec `json:"schema_registry,omitempty"`
		} `json:"source"`
	}{Name: "demo"}
	spec.Source.BootstrapServers = source
	if registry != "" {
		spec.Source.SchemaRegistry = &registrySpec{URLs: []string{registry}}
	}
	b, _ := json.Marshal(spec) // strings only: it cannot fail
	return string(b)
}

// devPost sends one of the demo's requests and returns its answer.
func devPost(ctx context.Context, base, path, body, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("set up demo mirror: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, nil
}

// devStepError is a demo request's failure, nil for a success or a 409 (it
// exists already).
func devStepError(path string, status int, body []byte) error {
	if status >= 300 && status != http.StatusConflict {
		return fmt.Errorf("set up demo mirror: POST %s: %d %s: %s", path, status, http.StatusText(status), bytes.TrimSpace(body))
	}
	return nil
}

// devBanner is what the banner names.
type devBanner struct {
	base                                string // the API's base URL
	source, destination                 string // the clusters' host:port
	sourceRegistry, destinationRegistry string // the registries' base URLs
	auth                                bool   // the API needs a token
	noDemoMirror                        bool   // no mirror demo was made
	rate                                int    // demo records per second per topic
}

func printDevBanner(w io.Writer, b devBanner) {
	// With tokens the lines send KMIRROR_API_TOKEN from the shell, never
	// the token itself.
	curl, cli, note := "curl -s", "", ""
	if b.auth {
		curl = `curl -s -H "Authorization: Bearer $KMIRROR_API_TOKEN"`
		cli = "KMIRROR_TOKEN=$KMIRROR_API_TOKEN "
		note = "\n  The API needs a token: KMIRROR_API_TOKEN (admin) or KMIRROR_API_READ_TOKEN (viewer).\n"
	}
	traffic := fmt.Sprintf("%d records/s each", b.rate)
	if b.rate == 0 {
		traffic = "no traffic: --rate 0"
	}
	fmt.Fprintf(w, `
kmirror dev is running. Ctrl-C stops everything and removes the data.
%[4]s
  Web console           %[1]s/
  API and docs          %[1]s/docs
  OpenAPI               %[1]s/openapi.json
  Metrics               %[1]s/metrics
  Source Kafka          %[2]s   (topics orders, payments, inventory, %[9]s; group demo-consumers;
                        a topic is created on its first write, as with kcat -P -t NAME)
  Destination           %[3]s
  Source registry       %[7]s   (subjects orders-value, payments-value)
  Destination registry  %[8]s
`, b.base, b.source, b.destination, note, curl, cli, b.sourceRegistry, b.destinationRegistry, traffic)
	if b.noDemoMirror {
		fmt.Fprintf(w, `
No mirror yet (--no-demo-mirror). Make one of your own:
  %[2]s -X POST -H 'Content-Type: application/json' %[1]s/v1/mirrors \
    -d '{"name":"from-a","source":{"bootstrap_servers":"%[3]s","schema_registry":{"urls":["%[4]s"]}}}'
  %[5]sgo run ./cmd/kmirror mirrors --server %[1]s --add --mirror from-a --topic 'orders|payments' --wait 1m
`, b.base, curl, b.source, b.sourceRegistry, cli)
		return
	}
	fmt.Fprintf(w, `
Try it:
  %[5]s %[1]s/v1/mirrors/demo/topics
  %[5]s '%[1]s/v1/partitions?mirror=demo'
  %[5]s -X POST -H 'Content-Type: application/json' -d '{"topic":"orders"}' %[1]s/v1/mirrors/demo/topics:pause
  %[5]s -X POST -H 'Content-Type: application/json' -d '{"topic":"orders"}' %[1]s/v1/mirrors/demo/topics:resume
  %[5]s -N %[1]s/v1/events

  curl -s %[7]s/subjects
  curl -s %[8]s/subjects

  %[6]sgo run ./cmd/kmirror mirrors --server %[1]s --describe
  %[6]sgo run ./cmd/kmirror mirrors --server %[1]s --pause --mirror demo --topic orders

  kcat -b %[2]s -L
  kcat -b %[2]s -C -t orders -o -5 -e
  kcat -b %[3]s -C -t orders -o -5 -e
`, b.base, b.source, b.destination, note, curl, cli, b.sourceRegistry, b.destinationRegistry)
}

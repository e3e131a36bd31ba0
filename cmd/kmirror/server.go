package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"kmirror/api"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/runtime/notifier"
	"kmirror/internal/runtime/secretbox"
	"kmirror/internal/runtime/startstop"
	"kmirror/internal/runtime/tlsreload"
	"kmirror/migrations"
	"kmirror/openapi"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/web"
	"kmirror/workers/heartbeat"
	"kmirror/workers/lease"
	"kmirror/workers/metadatasync"
	"kmirror/workers/partition"
	"kmirror/workers/statetopic"
)

// serverConfig is everything `kmirror server` needs; `kmirror dev` fills it
// in code.
type serverConfig struct {
	Listen string
	// DebugListen, when set, serves Go's profiles on this loopback address.
	DebugListen        string
	DatabaseURL        string
	Destination        kafkaconn.Config
	InstanceID         string
	LeaseTTL           time.Duration
	LeaseRenewInterval time.Duration
	// LeaseOutageGrace is how long past its session's last renewal an
	// instance may go on copying through a database outage, on its
	// heartbeats to the destination; 0 turns riding through off.
	LeaseOutageGrace time.Duration
	SourceTimeout    time.Duration
	// ShutdownTimeout is the whole shutdown's budget, every step included
	// (startstop.Budget); default defaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// budget is that budget, shared by the components (set by runServer).
	budget *startstop.Budget
	// steps are what the server is doing as it starts and stops, named in
	// the backstop's log line (nil: not tracked).
	steps *steps
	// DeliveryTimeout bounds a produced record's flight; it must be shorter
	// than the lease margin (TTL/3).
	DeliveryTimeout time.Duration
	// Retry is the FAILED → PREPARING backoff policy.
	Retry partition.RetryPolicy
	// StatePartitions and StateReplicationFactor shape __mirror_state when
	// kmirror creates it (mirror.topic.num.partitions, default 50).
	StatePartitions        int
	StateReplicationFactor int
	// MetadataRefreshInterval is the metadata sync interval of mirrors
	// that do not set mirror.metadata.refresh.interval.ms; default 30s.
	MetadataRefreshInterval time.Duration
	// HistoryInterval is how often the progress history behind
	// GET /v1/history is sampled; default 5s.
	HistoryInterval time.Duration
	Logger          *slog.Logger
	// Tokens protect the API when set (KMIRROR_API_TOKEN,
	// KMIRROR_API_READ_TOKEN: environment only, never flags, so they stay
	// out of process listings; and the hashes of --api-tokens-file).
	Tokens api.Tokens
	// Secrets encrypts source secrets at rest with a fixed key (kmirror
	// dev's). SecretKeyFile (KMIRROR_SECRET_KEY_FILE), when set, takes its
	// place and is read again on SIGHUP and when it changes. With neither,
	// requests that set a secret are refused unless InsecureClearSecrets.
	Secrets       *secretbox.Keyring
	SecretKeyFile string
	// InsecureClearSecrets stores source secrets as given when there is no
	// key (--insecure-store-secrets-in-clear).
	InsecureClearSecrets bool
	// TLSCertFile and TLSKeyFile, when set, serve the API over TLS; the pair
	// is read again on SIGHUP and when the files change.
	TLSCertFile, TLSKeyFile string
	// TLSReloadInterval is how often the TLS files are checked; default 5s.
	TLSReloadInterval time.Duration
	// InsecureNoAuth lets the server listen beyond loopback without tokens.
	InsecureNoAuth bool
	// PublicMetrics and PublicDocs serve /metrics and /docs without a token.
	PublicMetrics bool
	PublicDocs    bool
	// ChangeRate, ChangeBurst and MaxStreams are the per-caller limits
	// (api.Config).
	ChangeRate  float64
	ChangeBurst int
	MaxStreams  int
	// DescribeRate paces GET /v1/partitions for the whole instance, in rows
	// per second (api.Config.DescribeRate).
	DescribeRate float64
	// DestinationRegistry is the deployment's one destination Schema
	// Registry, into which the mirrors' subjects are copied; nil when none
	// is configured (--destination-schema-registry-url).
	DestinationRegistry *schemaregistry.Config
	// Ready, when set, receives the bound address once the API serves.
	Ready func(addr string)
}

func (c *serverConfig) validate() error {
	if c.DatabaseURL == "" {
		return errors.New("--database-url (KMIRROR_DATABASE_URL) is required")
	}
	if c.LeaseRenewInterval >= c.LeaseTTL {
		return fmt.Errorf("lease renew interval %s must be shorter than the lease TTL %s", c.LeaseRenewInterval, c.LeaseTTL)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together")
	}
	if !c.Tokens.Enabled() && !c.InsecureNoAuth && !loopback(c.Listen) {
		return fmt.Errorf("refusing to serve %s without API tokens: anyone who reaches it could fail over "+
			"topics. Set --api-tokens-file (see kmirror token new) or KMIRROR_API_TOKEN, listen on 127.0.0.1, "+
			"or pass --insecure-no-auth", c.Listen)
	}
	if c.DestinationRegistry != nil {
		if err := c.DestinationRegistry.Validate(); err != nil {
			return fmt.Errorf("destination Schema Registry: %w", err)
		}
	}
	if c.DeliveryTimeout >= c.LeaseTTL/3 {
		return fmt.Errorf("delivery timeout %s must be shorter than the lease safety margin (TTL/3 = %s)", c.DeliveryTimeout, c.LeaseTTL/3)
	}
	return nil
}

// loopback says whether a listen address accepts only local connections.
// An empty host listens on every interface; a host name other than
// localhost counts as reachable from elsewhere.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func envOr(name, def string) string { return cmp.Or(os.Getenv(name), def) }

func envBool(name string) bool {
	b, _ := strconv.ParseBool(os.Getenv(name))
	return b
}

func envFloat(name string, def float64) float64 {
	if f, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil {
		return f
	}
	return def
}

// loadTokens reads the tokens of the environment and of the tokens file.
func loadTokens(file string) (api.Tokens, error) {
	t := api.Tokens{Admin: os.Getenv("KMIRROR_API_TOKEN"), Read: os.Getenv("KMIRROR_API_READ_TOKEN")}
	if file == "" {
		return t, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return t, fmt.Errorf("--api-tokens-file: %w", err)
	}
	defer f.Close()
	if t.File, err = api.ParseTokensFile(f); err != nil {
		return t, fmt.Errorf("--api-tokens-file %s: %w", file, err)
	}
	if len(t.File) == 0 {
		return t, fmt.Errorf("--api-tokens-file %s holds no token (add a line from kmirror token new)", file)
	}
	return t, t.Validate()
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func serverCommand(ctx context.Context, args []string, stderr io.Writer) error {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("kmirror server", flag.ContinueOnError)
	var cfg serverConfig
	var dest, registryURLs string
	fs.StringVar(&cfg.Listen, "listen", envOr("KMIRROR_LISTEN", "127.0.0.1:8080"), "HTTP listen address (KMIRROR_LISTEN)")
	fs.StringVar(&cfg.DebugListen, "debug-listen", os.Getenv("KMIRROR_DEBUG_LISTEN"), "serve Go's profiles (/debug/pprof/) on this loopback address, e.g. 127.0.0.1:6060; off when empty (KMIRROR_DEBUG_LISTEN)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("KMIRROR_DATABASE_URL"), "Postgres URL (KMIRROR_DATABASE_URL)")
	fs.StringVar(&dest, "destination-bootstrap", os.Getenv("KMIRROR_DESTINATION_BOOTSTRAP"), "destination cluster host:port list (KMIRROR_DESTINATION_BOOTSTRAP)")
	fs.StringVar(&registryURLs, "destination-schema-registry-url", os.Getenv("KMIRROR_DESTINATION_SCHEMA_REGISTRY_URL"), "the destination Schema Registry, into which mirrors copy their source registry's subjects with ids kept: http(s) URLs, comma-separated; none when empty. Its credentials and TLS are KMIRROR_DESTINATION_SCHEMA_REGISTRY_* (below) (KMIRROR_DESTINATION_SCHEMA_REGISTRY_URL)")
	fs.StringVar(&cfg.InstanceID, "instance-id", envOr("KMIRROR_INSTANCE_ID", fmt.Sprintf("%s-%d", host, os.Getpid())), "unique id of this instance (KMIRROR_INSTANCE_ID)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", envDuration("KMIRROR_LEASE_TTL", 15*time.Second), "lease time-to-live (KMIRROR_LEASE_TTL)")
	fs.DurationVar(&cfg.LeaseRenewInterval, "lease-renew-interval", envDuration("KMIRROR_LEASE_RENEW_INTERVAL", 5*time.Second), "lease renew interval (KMIRROR_LEASE_RENEW_INTERVAL)")
	fs.DurationVar(&cfg.LeaseOutageGrace, "lease-outage-grace", envDuration("KMIRROR_LEASE_OUTAGE_GRACE", defaultOutageGrace), "how long past the last renewal of its session an instance that cannot reach PostgreSQL goes on copying, as long as the destination acknowledges its heartbeats (__mirror_heartbeats); 0 stops copying once the session expires (KMIRROR_LEASE_OUTAGE_GRACE)")
	fs.DurationVar(&cfg.SourceTimeout, "source-timeout", envDuration("KMIRROR_SOURCE_TIMEOUT", 5*time.Second), "how long an API call waits for a source cluster (KMIRROR_SOURCE_TIMEOUT)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", envDuration("KMIRROR_SHUTDOWN_TIMEOUT", defaultShutdownTimeout), "how long the steps of a shutdown may wait in all, whatever is down; a second past it the process exits anyway (KMIRROR_SHUTDOWN_TIMEOUT)")
	fs.DurationVar(&cfg.DeliveryTimeout, "delivery-timeout", envDuration("KMIRROR_DELIVERY_TIMEOUT", 0), "how long a produced record may be in flight; below TTL/3 (KMIRROR_DELIVERY_TIMEOUT, default min(4s, TTL/4))")
	fs.DurationVar(&cfg.Retry.Initial, "retry-initial", envDuration("KMIRROR_RETRY_INITIAL", time.Second), "first FAILED retry backoff ceiling (KMIRROR_RETRY_INITIAL)")
	fs.DurationVar(&cfg.Retry.Max, "retry-max", envDuration("KMIRROR_RETRY_MAX", 300*time.Second), "largest FAILED retry backoff (KMIRROR_RETRY_MAX)")
	fs.IntVar(&cfg.Retry.MaxAttempts, "retry-max-attempts", envInt("KMIRROR_RETRY_MAX_ATTEMPTS", 100), "FAILED retries before waiting for an operator (KMIRROR_RETRY_MAX_ATTEMPTS)")
	fs.IntVar(&cfg.StatePartitions, "state-topic-partitions", envInt("KMIRROR_STATE_TOPIC_PARTITIONS", 50), "partitions of __mirror_state when created: mirror.topic.num.partitions (KMIRROR_STATE_TOPIC_PARTITIONS)")
	fs.IntVar(&cfg.StateReplicationFactor, "state-topic-replication-factor", envInt("KMIRROR_STATE_TOPIC_REPLICATION_FACTOR", -1), "replication factor of __mirror_state when created; -1 is the broker default (KMIRROR_STATE_TOPIC_REPLICATION_FACTOR)")
	fs.DurationVar(&cfg.MetadataRefreshInterval, "metadata-refresh-interval", envDuration("KMIRROR_METADATA_REFRESH_INTERVAL", 30*time.Second), "metadata sync interval of mirrors that do not set mirror.metadata.refresh.interval.ms (KMIRROR_METADATA_REFRESH_INTERVAL)")
	logLevel := fs.String("log-level", envOr("KMIRROR_LOG_LEVEL", "info"), "debug, info, warn or error (KMIRROR_LOG_LEVEL)")
	fs.StringVar(&cfg.SecretKeyFile, "secret-key-file", os.Getenv("KMIRROR_SECRET_KEY_FILE"), "file holding the AES-256 key (64 hex digits; kmirror secrets new-key writes one) that encrypts source secrets (SASL passwords, TLS keys, AWS secret keys and session tokens, OAuth client secrets) in the database; one key a line during a rotation: the first seals, each opens. Re-read on SIGHUP and when it changes (KMIRROR_SECRET_KEY_FILE)")
	fs.BoolVar(&cfg.InsecureClearSecrets, "insecure-store-secrets-in-clear", envBool("KMIRROR_INSECURE_STORE_SECRETS_IN_CLEAR"), "without --secret-key-file, store source secrets in the database as given instead of refusing them (KMIRROR_INSECURE_STORE_SECRETS_IN_CLEAR)")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", os.Getenv("KMIRROR_TLS_CERT_FILE"), "serve the API over TLS with this certificate (PEM, chain included); re-read on SIGHUP and when it changes (KMIRROR_TLS_CERT_FILE)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key-file", os.Getenv("KMIRROR_TLS_KEY_FILE"), "the TLS certificate's private key (PEM) (KMIRROR_TLS_KEY_FILE)")
	tokensFile := fs.String("api-tokens-file", os.Getenv("KMIRROR_API_TOKENS_FILE"), "file of API tokens, one \"NAME ROLE SHA256-HEX\" a line, as kmirror token new prints them (KMIRROR_API_TOKENS_FILE). KMIRROR_API_TOKEN (admin) and KMIRROR_API_READ_TOKEN (viewer) are read from the environment too")
	fs.BoolVar(&cfg.InsecureNoAuth, "insecure-no-auth", envBool("KMIRROR_INSECURE_NO_AUTH"), "serve a non-loopback address without API tokens: anyone who reaches it may do anything (KMIRROR_INSECURE_NO_AUTH)")
	fs.BoolVar(&cfg.PublicMetrics, "public-metrics", envBool("KMIRROR_PUBLIC_METRICS"), "serve /metrics without a token (KMIRROR_PUBLIC_METRICS)")
	fs.BoolVar(&cfg.PublicDocs, "public-docs", envBool("KMIRROR_PUBLIC_DOCS"), "serve /docs and /openapi.json without a token (KMIRROR_PUBLIC_DOCS)")
	fs.Float64Var(&cfg.ChangeRate, "api-change-rate", envFloat("KMIRROR_API_CHANGE_RATE", 5), "changes (API calls other than GET) per second per token, after a burst; 429 beyond it; negative: no limit (KMIRROR_API_CHANGE_RATE)")
	fs.IntVar(&cfg.ChangeBurst, "api-change-burst", envInt("KMIRROR_API_CHANGE_BURST", 20), "changes a token may make at once before --api-change-rate applies (KMIRROR_API_CHANGE_BURST)")
	fs.Float64Var(&cfg.DescribeRate, "api-describe-rate", envFloat("KMIRROR_API_DESCRIBE_RATE", api.DefaultDescribeRate), "partition rows per second GET /v1/partitions may describe for the whole instance, after a burst of 10,000; a page waits its turn, so that listing cannot take the CPU mirroring needs; negative: no limit (KMIRROR_API_DESCRIBE_RATE)")
	fs.IntVar(&cfg.MaxStreams, "api-max-event-streams", envInt("KMIRROR_API_MAX_EVENT_STREAMS", 8), "/v1/events streams one token may hold open; negative: no cap (KMIRROR_API_MAX_EVENT_STREAMS)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage of kmirror server:")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), serverEnvOnly)
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	var err error
	if cfg.Tokens, err = loadTokens(*tokensFile); err != nil {
		return err
	}
	if cfg.Destination, err = destinationFromEnv(dest); err != nil {
		return err
	}
	if cfg.DestinationRegistry, err = destinationRegistryFromEnv(registryURLs); err != nil {
		return err
	}
	cfg.steps = &steps{}
	defer shutdownBackstop(ctx, cmp.Or(cfg.ShutdownTimeout, defaultShutdownTimeout)+backstopAfter, cfg.Logger, os.Exit, cfg.steps.names)()
	err = runServer(ctx, cfg)
	if err != nil && ctx.Err() != nil {
		// Told to stop while it started: a stop, not a failure.
		cfg.Logger.Info("stopped while starting", "err", err)
		return nil
	}
	return err
}

// serverEnvOnly lists the settings that are read from the environment only:
// secrets stay out of process listings.
const serverEnvOnly = `
Environment only (secrets stay out of process listings):
  KMIRROR_API_TOKEN                        an API token with role admin (named api-token)
  KMIRROR_API_READ_TOKEN                   an API token with role viewer (named api-read-token)
  KMIRROR_DESTINATION_SECURITY_PROTOCOL    PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
  KMIRROR_DESTINATION_SASL_MECHANISM       PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, AWS_MSK_IAM or OAUTHBEARER
  KMIRROR_DESTINATION_SASL_USERNAME        PLAIN and SCRAM: the destination's SASL user
  KMIRROR_DESTINATION_SASL_PASSWORD        its password
` + serverEnvSASL + `  KMIRROR_DESTINATION_TLS_CA_FILE          CA certificates (PEM) to trust for the destination
  KMIRROR_DESTINATION_TLS_CERT_FILE        client certificate (PEM)
  KMIRROR_DESTINATION_TLS_KEY_FILE         its private key (PEM)
  KMIRROR_DESTINATION_TLS_SERVER_NAME      the name to verify the destination's certificate against
` + serverEnvRegistry

// destinationFromEnv builds the destination connection from the
// KMIRROR_DESTINATION_* variables, reading TLS files.
func destinationFromEnv(bootstrap string) (kafkaconn.Config, error) {
	c := kafkaconn.Config{Security: kafkaconn.Security{
		Protocol:      envOr("KMIRROR_DESTINATION_SECURITY_PROTOCOL", "PLAINTEXT"),
		SASLMechanism: os.Getenv("KMIRROR_DESTINATION_SASL_MECHANISM"),
		SASLUsername:  os.Getenv("KMIRROR_DESTINATION_SASL_USERNAME"),
		SASLPassword:  os.Getenv("KMIRROR_DESTINATION_SASL_PASSWORD"),
		TLSServerName: os.Getenv("KMIRROR_DESTINATION_TLS_SERVER_NAME"),
	}}
	if err := destinationSASLFromEnv(&c.Security); err != nil {
		return c, err
	}
	if bootstrap != "" {
		servers, err := service.ParseBootstrapServers(bootstrap)
		if err != nil {
			return c, fmt.Errorf("--destination-bootstrap: %w", err)
		}
		c.BootstrapServers = servers
	}
	for env, dst := range map[string]*string{
		"KMIRROR_DESTINATION_TLS_CA_FILE":   &c.Security.TLSCAPEM,
		"KMIRROR_DESTINATION_TLS_CERT_FILE": &c.Security.TLSCertPEM,
		"KMIRROR_DESTINATION_TLS_KEY_FILE":  &c.Security.TLSKeyPEM,
	} {
		if path := os.Getenv(env); path != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				return c, fmt.Errorf("%s: %w", env, err)
			}
			*dst = string(b)
		}
	}
	return c, nil
}

// components builds this instance's long-running pieces in start order:
// StartAll starts them one by one and StopAll stops them in reverse, so the
// lease manager hands back every lease (after its workers flushed) and
// marks the instance stopped before the engine and syncer close their
// clients, the relay publishes the final state changes, and the notifier
// closes last.
//
// The workers use pools of their own, which the API cannot exhaust: the
// lease manager a small one that nothing else touches, the rest of the data
// plane another.
func components(cfg serverConfig, pools workerPools, deployment string, notes *notifier.Notifier, svc *service.Workers, reg prometheus.Registerer, log *slog.Logger) ([]startstop.Service, error) {
	pool := pools.data
	host, _ := os.Hostname()
	nm := namer{log: log, budget: cfg.budget, steps: cfg.steps}
	if len(cfg.Destination.BootstrapServers) == 0 {
		log.Warn("no destination cluster configured (--destination-bootstrap): the control plane runs, nothing is mirrored")
		// The lease manager keeps only the session, so the instance is
		// listed live; it takes no lease.
		leases, err := lease.NewManager(lease.ManagerConfig{Pool: pools.leases, InstanceID: cfg.InstanceID,
			Hostname: host, Version: version, TTL: cfg.LeaseTTL, RenewInterval: cfg.LeaseRenewInterval, Logger: log,
			Notifier: notes, Registerer: reg, StopBudget: cfg.budget})
		if err != nil {
			return nil, err
		}
		return nm.nameAll([]startstop.Service{notes, leases}, "notifier", "lease session"), nil
	}
	relay, err := statetopic.NewRelay(statetopic.RelayConfig{Pool: pool, Destination: cfg.Destination,
		Partitions: int32(cfg.StatePartitions), ReplicationFactor: int16(cfg.StateReplicationFactor),
		Notifier: notes, Logger: log, Registerer: reg, StopBudget: cfg.budget})
	if err != nil {
		return nil, err
	}
	eng, err := partition.NewEngine(partition.EngineConfig{Pool: pool, Service: svc, InstanceID: cfg.InstanceID,
		Destination: cfg.Destination, Logger: log, DeliveryTimeout: cfg.DeliveryTimeout, Retry: cfg.Retry,
		Notifier: notes, Registerer: reg, StopBudget: cfg.budget, SourceState: statetopic.ReadState})
	if err != nil {
		return nil, err
	}
	syncer, err := metadatasync.New(metadatasync.Config{Pool: pool, Service: svc,
		InstanceID: cfg.InstanceID, Destination: cfg.Destination, DestinationRegistry: cfg.DestinationRegistry, Logger: log,
		DefaultInterval: cfg.MetadataRefreshInterval, Registerer: reg, Producer: eng, Notifier: notes})
	if err != nil {
		return nil, err
	}
	beats, err := heartbeat.New(heartbeat.Config{Destination: cfg.Destination, DeploymentID: deployment,
		InstanceID: cfg.InstanceID, ReplicationFactor: int16(cfg.StateReplicationFactor), Logger: log,
		Registerer: reg, Keys: func(ctx context.Context) ([]repo.HeartbeatKeyRow, error) {
			return repo.HeartbeatKeysList(ctx, pool)
		}})
	if err != nil {
		return nil, err
	}
	leases, err := lease.NewManager(lease.ManagerConfig{Pool: pools.leases, InstanceID: cfg.InstanceID,
		Hostname: host, Version: version, TTL: cfg.LeaseTTL, RenewInterval: cfg.LeaseRenewInterval, Logger: log,
		Partitions: eng, Mirrors: syncer, Notifier: notes, Registerer: reg, StopBudget: cfg.budget,
		Heartbeat: beats, OutageGrace: cfg.LeaseOutageGrace})
	if err != nil {
		return nil, err
	}
	data := startstop.Parallel(nm.nameAll([]startstop.Service{eng, syncer}, "engine", "metadata syncer")...)
	return nm.nameAll([]startstop.Service{notes, relay, data, beats, leases},
		"notifier", "outbox relay", "engine and metadata syncer", "heartbeats", "lease manager"), nil
}

// defaultOutageGrace is how long an instance rides through a database
// outage by default: a managed PostgreSQL fails over in 30 to 120 s.
const defaultOutageGrace = 60 * time.Second

// workerPools are the data plane's own database pools.
type workerPools struct {
	leases *pgxpool.Pool // the lease manager only
	data   *pgxpool.Pool // partition workers, sync, relay, notifier
}

// runServer migrates the schema, registers the instance and serves the API
// until ctx ends, then shuts down in order: HTTP, then the workers.
func runServer(ctx context.Context, cfg serverConfig) error {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, defaultShutdownTimeout)
	cfg.budget = &startstop.Budget{}
	// The budget begins at the signal, wherever the server is: a server
	// told to stop while it starts bounds its steps the same.
	stopBudget := context.AfterFunc(ctx, func() { cfg.budget.Begin(cfg.ShutdownTimeout) })
	defer stopBudget()
	cfg.DeliveryTimeout = cmp.Or(cfg.DeliveryTimeout, min(4*time.Second, cfg.LeaseTTL/4))
	if err := cfg.validate(); err != nil {
		return err
	}
	log := cfg.Logger.With("instance", cfg.InstanceID)
	logDestinationRegistry(log, cfg.DestinationRegistry)
	if !cfg.Tokens.Enabled() && !loopback(cfg.Listen) {
		log.Warn("--insecure-no-auth: the API has no tokens and listens on " + cfg.Listen +
			": anyone who reaches it may create, change and fail over mirrors")
	}
	if cfg.DebugListen != "" {
		debugCtx, stopDebug := context.WithCancel(context.WithoutCancel(ctx))
		closed, err := serveDebug(debugCtx, cfg.DebugListen, log)
		if err != nil {
			stopDebug()
			return err
		}
		// The last to stop, so a profile can watch the whole shutdown.
		defer closed()
		defer stopDebug()
	}
	// The API's certificate is read before anything starts: a bad pair
	// fails the start at once.
	var certs *tlsreload.Reloader
	if cfg.TLSCertFile != "" {
		var err error
		if certs, err = tlsreload.New(cfg.TLSCertFile, cfg.TLSKeyFile, log); err != nil {
			return err
		}
	}
	secrets, stopKeys, err := openSecretKeys(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopKeys()
	end := cfg.steps.begin("starting: migrations")
	err = untilDone(ctx, func() error { return migrations.Up(cfg.DatabaseURL) })
	end()
	if err != nil {
		return err
	}
	end = cfg.steps.begin("starting: opening the database pools")
	defer end()
	pool, err := repo.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer closePool("API", pool, cfg.budget, log)

	// The data plane's pools, which the API cannot exhaust.
	var pools workerPools
	if pools.leases, err = repo.OpenWith(ctx, cfg.DatabaseURL, repo.OpenParams{MaxConns: 2}); err != nil {
		return err
	}
	defer closePool("lease", pools.leases, cfg.budget, log)
	if pools.data, err = repo.OpenWith(ctx, cfg.DatabaseURL, repo.OpenParams{DefaultMaxConns: repo.DataPoolConns, Warm: true}); err != nil {
		return err
	}
	defer closePool("data plane", pools.data, cfg.budget, log)
	end()
	// The one LISTEN connection: it wakes the workers, and the API's topic
	// actions waiting for their partitions (?wait).
	notes, err := notifier.New(notifier.Config{Listen: repo.Notifications(pools.data), Channels: repo.Channels, Logger: log})
	if err != nil {
		return err
	}

	// The progress history behind GET /v1/history and the records-per-second
	// rates reads through the API's pool: it serves the API, not the data plane.
	history, err := service.NewHistory(service.HistoryConfig{Pool: pool, Logger: log, Interval: cfg.HistoryInterval})
	if err != nil {
		return err
	}
	// The domain's two faces, each over its side's pool: the API's, and the
	// workers'.
	control, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(cfg.SourceTimeout),
		SourceTimeout: cfg.SourceTimeout, Logger: log, History: history, Secrets: secrets,
		InsecureClearSecrets: cfg.InsecureClearSecrets, Destination: cfg.Destination, SourceState: statetopic.ReadState,
		Notifier: notes, Preflight: service.KafkaPreflight(), DestinationRegistry: cfg.DestinationRegistry})
	if err != nil {
		return err
	}
	workers, err := service.NewWorkers(service.WorkersConfig{Pool: pools.data, Logger: log, Secrets: secrets})
	if err != nil {
		return err
	}
	end = cfg.steps.begin("starting: checking the stored secrets")
	err = checkStoredSecrets(ctx, cfg, control, secrets, log)
	end()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		service.NewStateCollector(pool))
	handler, err := api.NewHandler(api.Config{Service: control, Pool: pool, Logger: log, Registry: reg, OpenAPI: openapi.JSON, Tokens: cfg.Tokens,
		PublicMetrics: cfg.PublicMetrics, PublicDocs: cfg.PublicDocs,
		ChangeRate: cfg.ChangeRate, ChangeBurst: cfg.ChangeBurst, MaxStreams: cfg.MaxStreams, DescribeRate: cfg.DescribeRate,
		Console: web.Handler()})
	if err != nil {
		return err
	}
	end = cfg.steps.begin("starting: reading the deployment's id")
	deployment, err := repo.DeploymentID(ctx, pool)
	end()
	if err != nil {
		return fmt.Errorf("read the deployment's id: %w", err)
	}
	pieces, err := components(cfg, pools, deployment, notes, workers, reg, log)
	if err != nil {
		return err
	}
	// Last to start, first to stop: it depends on nothing else.
	pieces = append(pieces, namer{log: log, budget: cfg.budget, steps: cfg.steps}.nameAll([]startstop.Service{history}, "history sampler")...)
	if err := startstop.StartAll(ctx, pieces...); err != nil {
		return err
	}
	// Deferred, so it runs after the HTTP shutdown below.
	defer startstop.StopAll(pieces...)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	srv := api.NewHTTPServer(handler, api.HTTPServerConfig{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
	// Requests' contexts end when the shutdown begins: an open event
	// stream (every console's) or a topic action's ?wait would otherwise
	// hold the HTTP shutdown for as long as it may wait.
	requests, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	srv.BaseContext = func(net.Listener) context.Context { return requests }
	scheme := "http"
	if certs != nil {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		watchCtx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go certs.Watch(watchCtx, cfg.TLSReloadInterval, hup)
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}
		scheme = "https"
	}
	serveErr := make(chan error, 1)
	go func() {
		if scheme == "https" {
			serveErr <- srv.ServeTLS(ln, "", "")
			return
		}
		serveErr <- srv.Serve(ln)
	}()
	addr := ln.Addr().String()
	log.Info("kmirror server started", "listen", addr, "scheme", scheme, "version", version,
		"destination", strings.Join(cfg.Destination.BootstrapServers, ","))
	if cfg.Ready != nil {
		cfg.Ready(addr)
	}

	select {
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "budget", cfg.ShutdownTimeout)
	cfg.budget.Begin(cfg.ShutdownTimeout)
	endRequests()
	shutdownCtx, cancel := cfg.budget.Context(context.Background(), httpShutdownTimeout)
	defer cancel()
	end = cfg.steps.begin("stopping HTTP")
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("slow to stop: http shutdown timed out after "+httpShutdownTimeout.String(), "component", "HTTP", "err", err)
	}
	end()
	return nil
}

package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"kmirror/api"
	"kmirror/internal/kafkaconn"
	"kmirror/internal/notifier"
	"kmirror/internal/startstop"
	"kmirror/migrations"
	"kmirror/openapi"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/web"
	"kmirror/workers/lease"
	"kmirror/workers/metadatasync"
	"kmirror/workers/partition"
	"kmirror/workers/statetopic"
)

// serverConfig is everything `kmirror server` needs; `kmirror dev` fills it
// in code.
type serverConfig struct {
	Listen             string
	DatabaseURL        string
	Destination        kafkaconn.Config
	InstanceID         string
	LeaseTTL           time.Duration
	LeaseRenewInterval time.Duration
	SourceTimeout      time.Duration
	ShutdownTimeout    time.Duration
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
	// Tokens protect the /v1 API when set (KMIRROR_API_TOKEN,
	// KMIRROR_API_READ_TOKEN: environment only, never flags, so they stay
	// out of process listings).
	Tokens api.Tokens
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
	if c.DeliveryTimeout >= c.LeaseTTL/3 {
		return fmt.Errorf("delivery timeout %s must be shorter than the lease safety margin (TTL/3 = %s)", c.DeliveryTimeout, c.LeaseTTL/3)
	}
	return nil
}

func envOr(name, def string) string { return cmp.Or(os.Getenv(name), def) }

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
	fs.SetOutput(stderr)
	var cfg serverConfig
	var dest string
	fs.StringVar(&cfg.Listen, "listen", envOr("KMIRROR_LISTEN", "127.0.0.1:8080"), "HTTP listen address (KMIRROR_LISTEN)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("KMIRROR_DATABASE_URL"), "Postgres URL (KMIRROR_DATABASE_URL)")
	fs.StringVar(&dest, "destination-bootstrap", os.Getenv("KMIRROR_DESTINATION_BOOTSTRAP"), "destination cluster host:port list (KMIRROR_DESTINATION_BOOTSTRAP)")
	fs.StringVar(&cfg.InstanceID, "instance-id", envOr("KMIRROR_INSTANCE_ID", fmt.Sprintf("%s-%d", host, os.Getpid())), "unique id of this instance (KMIRROR_INSTANCE_ID)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", envDuration("KMIRROR_LEASE_TTL", 15*time.Second), "lease time-to-live (KMIRROR_LEASE_TTL)")
	fs.DurationVar(&cfg.LeaseRenewInterval, "lease-renew-interval", envDuration("KMIRROR_LEASE_RENEW_INTERVAL", 5*time.Second), "lease renew interval (KMIRROR_LEASE_RENEW_INTERVAL)")
	fs.DurationVar(&cfg.SourceTimeout, "source-timeout", envDuration("KMIRROR_SOURCE_TIMEOUT", 5*time.Second), "how long an API call waits for a source cluster (KMIRROR_SOURCE_TIMEOUT)")
	fs.DurationVar(&cfg.DeliveryTimeout, "delivery-timeout", envDuration("KMIRROR_DELIVERY_TIMEOUT", 0), "how long a produced record may be in flight; below TTL/3 (KMIRROR_DELIVERY_TIMEOUT, default min(4s, TTL/4))")
	fs.DurationVar(&cfg.Retry.Initial, "retry-initial", envDuration("KMIRROR_RETRY_INITIAL", time.Second), "first FAILED retry backoff ceiling (KMIRROR_RETRY_INITIAL)")
	fs.DurationVar(&cfg.Retry.Max, "retry-max", envDuration("KMIRROR_RETRY_MAX", 300*time.Second), "largest FAILED retry backoff (KMIRROR_RETRY_MAX)")
	fs.IntVar(&cfg.Retry.MaxAttempts, "retry-max-attempts", envInt("KMIRROR_RETRY_MAX_ATTEMPTS", 100), "FAILED retries before waiting for an operator (KMIRROR_RETRY_MAX_ATTEMPTS)")
	fs.IntVar(&cfg.StatePartitions, "state-topic-partitions", envInt("KMIRROR_STATE_TOPIC_PARTITIONS", 50), "partitions of __mirror_state when created: mirror.topic.num.partitions (KMIRROR_STATE_TOPIC_PARTITIONS)")
	fs.IntVar(&cfg.StateReplicationFactor, "state-topic-replication-factor", envInt("KMIRROR_STATE_TOPIC_REPLICATION_FACTOR", -1), "replication factor of __mirror_state when created; -1 is the broker default (KMIRROR_STATE_TOPIC_REPLICATION_FACTOR)")
	fs.DurationVar(&cfg.MetadataRefreshInterval, "metadata-refresh-interval", envDuration("KMIRROR_METADATA_REFRESH_INTERVAL", 30*time.Second), "metadata sync interval of mirrors that do not set mirror.metadata.refresh.interval.ms (KMIRROR_METADATA_REFRESH_INTERVAL)")
	logLevel := fs.String("log-level", envOr("KMIRROR_LOG_LEVEL", "info"), "debug, info, warn or error (KMIRROR_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Tokens = api.Tokens{Admin: os.Getenv("KMIRROR_API_TOKEN"), Read: os.Getenv("KMIRROR_API_READ_TOKEN")}
	var err error
	if cfg.Destination, err = destinationFromEnv(dest); err != nil {
		return err
	}
	return runServer(ctx, cfg)
}

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
// lease manager hands back every lease (after its workers flushed) before
// the engine and syncer close their clients, the relay publishes the final
// state changes, the heartbeat marks the instance stopped, and the notifier
// closes last.
//
// The workers use pools of their own, which the API cannot exhaust: leases
// and the heartbeat a small one that nothing else touches, the rest of the
// data plane another.
func components(cfg serverConfig, pools workerPools, notes *notifier.Notifier, svc *service.Service, reg prometheus.Registerer, log *slog.Logger) ([]startstop.Service, error) {
	pool := pools.data
	host, _ := os.Hostname()
	hb, err := lease.NewHeartbeat(lease.HeartbeatConfig{Pool: pools.leases, InstanceID: cfg.InstanceID,
		Hostname: host, Version: version, Interval: cfg.LeaseRenewInterval, Logger: log})
	if err != nil {
		return nil, err
	}
	if len(cfg.Destination.BootstrapServers) == 0 {
		log.Warn("no destination cluster configured (--destination-bootstrap): the control plane runs, nothing is mirrored")
		return []startstop.Service{notes, hb}, nil
	}
	relay, err := statetopic.NewRelay(statetopic.RelayConfig{Pool: pool, Destination: cfg.Destination,
		Partitions: int32(cfg.StatePartitions), ReplicationFactor: int16(cfg.StateReplicationFactor),
		Notifier: notes, Logger: log})
	if err != nil {
		return nil, err
	}
	eng, err := partition.NewEngine(partition.EngineConfig{Pool: pool, Service: svc, InstanceID: cfg.InstanceID,
		Destination: cfg.Destination, Logger: log, DeliveryTimeout: cfg.DeliveryTimeout, Retry: cfg.Retry,
		Notifier: notes, Registerer: reg})
	if err != nil {
		return nil, err
	}
	syncer, err := metadatasync.New(metadatasync.Config{Pool: pool, Service: svc,
		InstanceID: cfg.InstanceID, Destination: cfg.Destination, Logger: log,
		DefaultInterval: cfg.MetadataRefreshInterval, Registerer: reg, Producer: eng, Notifier: notes})
	if err != nil {
		return nil, err
	}
	leases, err := lease.NewManager(lease.ManagerConfig{Pool: pools.leases, InstanceID: cfg.InstanceID,
		TTL: cfg.LeaseTTL, RenewInterval: cfg.LeaseRenewInterval, Logger: log,
		Partitions: eng, Mirrors: syncer, Notifier: notes, Registerer: reg})
	if err != nil {
		return nil, err
	}
	return []startstop.Service{notes, hb, relay, startstop.Parallel(eng, syncer), leases}, nil
}

// workerPools are the data plane's own database pools.
type workerPools struct {
	leases *pgxpool.Pool // the lease manager and heartbeat only
	data   *pgxpool.Pool // partition workers, sync, relay, notifier
}

// runServer migrates the schema, registers the instance and serves the API
// until ctx ends, then shuts down in order: HTTP, then the workers.
func runServer(ctx context.Context, cfg serverConfig) error {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, 10*time.Second)
	cfg.DeliveryTimeout = cmp.Or(cfg.DeliveryTimeout, min(4*time.Second, cfg.LeaseTTL/4))
	if err := cfg.validate(); err != nil {
		return err
	}
	log := cfg.Logger.With("instance", cfg.InstanceID)
	if err := migrations.Up(cfg.DatabaseURL); err != nil {
		return err
	}
	pool, err := repo.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	// The progress history behind GET /v1/history and the records-per-second
	// rates reads through the API's pool: it serves the API, not the data plane.
	history, err := service.NewHistory(service.HistoryConfig{Pool: pool, Logger: log, Interval: cfg.HistoryInterval})
	if err != nil {
		return err
	}
	svc, err := service.New(service.Config{Pool: pool, Catalog: service.KafkaCatalog(cfg.SourceTimeout),
		Logger: log, InstanceTTL: cfg.LeaseTTL, History: history})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		service.NewStateCollector(pool))
	// The data plane's pools and its own service over them.
	var pools workerPools
	if pools.leases, err = repo.OpenWith(ctx, cfg.DatabaseURL, repo.OpenParams{MaxConns: 2}); err != nil {
		return err
	}
	defer pools.leases.Close()
	if pools.data, err = repo.OpenWith(ctx, cfg.DatabaseURL, repo.OpenParams{DefaultMaxConns: repo.DataPoolConns}); err != nil {
		return err
	}
	defer pools.data.Close()
	// The one LISTEN connection: it wakes the workers, and the API's topic
	// actions waiting for their partitions (?wait).
	notes, err := notifier.New(notifier.Config{Pool: pools.data, Logger: log})
	if err != nil {
		return err
	}
	handler, err := api.NewHandler(api.Config{Service: svc, Pool: pool, Logger: log, Registry: reg, OpenAPI: openapi.JSON, Tokens: cfg.Tokens,
		Console: web.Handler(), Notifier: notes})
	if err != nil {
		return err
	}
	workerSvc, err := service.New(service.Config{Pool: pools.data, Catalog: service.KafkaCatalog(cfg.SourceTimeout),
		Logger: log, InstanceTTL: cfg.LeaseTTL})
	if err != nil {
		return err
	}
	pieces, err := components(cfg, pools, notes, workerSvc, reg, log)
	if err != nil {
		return err
	}
	// Last to start, first to stop: it depends on nothing else.
	pieces = append(pieces, history)
	if err := startstop.StartAll(ctx, pieces...); err != nil {
		return err
	}
	// Deferred, so it runs after the HTTP shutdown below.
	defer startstop.StopAll(pieces...)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	log.Info("kmirror server started", "listen", addr, "version", version,
		"destination", strings.Join(cfg.Destination.BootstrapServers, ","))
	if cfg.Ready != nil {
		cfg.Ready(addr)
	}

	select {
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("http shutdown timed out after "+cfg.ShutdownTimeout.String(), "err", err)
	}
	return nil
}

// Package service holds kmirror's domain rules: validation, the partition
// state machine, desired-state changes and topic resolution. It changes
// desired state in Postgres; workers reconcile from there.
package service

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/runtime/notifier"
)

// SourceCatalog lists a source cluster's topics with their partition counts.
// kafkaconn.TopicPartitions implements it for real clusters.
type SourceCatalog interface {
	TopicPartitions(ctx context.Context, conn kafkaconn.Config) (map[string]int32, error)
}

// CatalogFunc adapts a function to SourceCatalog.
type CatalogFunc func(ctx context.Context, conn kafkaconn.Config) (map[string]int32, error)

// TopicPartitions calls f.
func (f CatalogFunc) TopicPartitions(ctx context.Context, conn kafkaconn.Config) (map[string]int32, error) {
	return f(ctx, conn)
}

// KafkaCatalog returns the real SourceCatalog, giving up on a source after timeout.
func KafkaCatalog(timeout time.Duration) SourceCatalog {
	return CatalogFunc(func(ctx context.Context, conn kafkaconn.Config) (map[string]int32, error) {
		return kafkaconn.TopicPartitions(ctx, conn, timeout)
	})
}

// The domain has two faces over one set of rules. Control is what the API
// and the CLI's offline commands call: mirrors, topics, the readers behind
// describe, restore and secrets. Workers is what the data plane and the
// metadata sync call: partition transitions, the fenced writes of topic and
// partition rows, and what a sync pass finds on the source. Each is built
// once, over its own pool (the API's and the data plane's), and neither sees
// the other's methods; the rules they share live on core.

// core is what both faces need: the database and the source secrets.
type core struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	secrets SecretKeys
	// insecureClear: without a key, store secrets as given.
	insecureClear bool
}

// Config wires a Control.
type Config struct {
	Pool    *pgxpool.Pool
	Catalog SourceCatalog
	Logger  *slog.Logger
	// History, when set, supplies the records per second of mirrors and
	// topics and the progress history; without it they are 0 and empty.
	History *History
	// Secrets, when set, encrypts source secrets before they are stored
	// (KMIRROR_SECRET_KEY_FILE). Without it a request that sets a secret is
	// refused (ErrSecretKeyRequired), unless InsecureClearSecrets.
	Secrets SecretKeys
	// InsecureClearSecrets stores source secrets as given when there is no
	// key (--insecure-store-secrets-in-clear).
	InsecureClearSecrets bool
	// SourceTimeout bounds the source reads of a remove's dry run
	// (--source-timeout); default 5s.
	SourceTimeout time.Duration
	// Destination and SourceState (the reader of a cluster's
	// __mirror_state) let an add's dry run with continue prove, per
	// partition, what continuing would do; without them it is refused.
	Destination kafkaconn.Config
	SourceState func(ctx context.Context, conn kafkaconn.Config) (map[string][]byte, error)
	// Notifier, when set, wakes a WaitForTopics as soon as a partition
	// changes state; without it a wait polls.
	Notifier *notifier.Notifier
	// Preflight, when set, checks the clusters before AddTopics adds
	// (KafkaPreflight: the server's); CheckMirror checks the real clusters
	// either way.
	Preflight Preflight
	// DestinationRegistry is the deployment's destination Schema Registry
	// (--destination-schema-registry-url), nil when it has none:
	// CheckMirror checks it for mirrors that name a source registry.
	DestinationRegistry *schemaregistry.Config
}

func (c *Config) validate() error {
	if c.Pool == nil {
		return errors.New("service: Pool is required")
	}
	if c.Catalog == nil {
		return errors.New("service: Catalog is required")
	}
	return nil
}

// Control is the domain as the API sees it.
type Control struct {
	core
	catalog       SourceCatalog
	history       *History
	sourceTimeout time.Duration
	destination   kafkaconn.Config
	sourceState   func(ctx context.Context, conn kafkaconn.Config) (map[string][]byte, error)
	notes         *notifier.Notifier
	preflight     Preflight
	destRegistry  *schemaregistry.Config
}

// NewControl returns the API's face of the domain.
func NewControl(cfg Config) (*Control, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Control{
		core: core{pool: cfg.Pool, log: cmp.Or(cfg.Logger, slog.Default()),
			secrets: cfg.Secrets, insecureClear: cfg.InsecureClearSecrets},
		catalog:       cfg.Catalog,
		history:       cfg.History,
		sourceTimeout: cmp.Or(cfg.SourceTimeout, 5*time.Second),
		destination:   cfg.Destination,
		sourceState:   cfg.SourceState,
		notes:         cfg.Notifier,
		preflight:     cfg.Preflight,
		destRegistry:  cfg.DestinationRegistry,
	}, nil
}

// WorkersConfig wires a Workers.
type WorkersConfig struct {
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Secrets opens the source secrets a worker connects with; nil when
	// the server has no key (secrets are then stored in clear).
	Secrets SecretKeys
}

// Workers is the domain as the data plane and the metadata sync see it.
type Workers struct {
	core
}

// NewWorkers returns the workers' face of the domain.
func NewWorkers(cfg WorkersConfig) (*Workers, error) {
	if cfg.Pool == nil {
		return nil, errors.New("service: Pool is required")
	}
	return &Workers{core: core{pool: cfg.Pool, log: cmp.Or(cfg.Logger, slog.Default()), secrets: cfg.Secrets}}, nil
}

// sourceTopics lists the source's topics, turning any failure into an
// *UnavailableError that names the bootstrap servers.
func (s *Control) sourceTopics(ctx context.Context, conn kafkaconn.Config) (map[string]int32, error) {
	topics, err := s.catalog.TopicPartitions(ctx, conn)
	if err != nil {
		return nil, sourceUnavailable(conn, err)
	}
	return topics, nil
}

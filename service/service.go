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

	"kmirror/internal/runtime/kafkaconn"
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

// Config wires a Service.
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

// Service is the control plane's domain layer.
type Service struct {
	pool    *pgxpool.Pool
	catalog SourceCatalog
	log     *slog.Logger
	history *History
	secrets SecretKeys
	// insecureClear: without a key, store secrets as given.
	insecureClear bool
	sourceTimeout time.Duration
	destination   kafkaconn.Config
	sourceState   func(ctx context.Context, conn kafkaconn.Config) (map[string][]byte, error)
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Service{
		pool:          cfg.Pool,
		catalog:       cfg.Catalog,
		log:           cmp.Or(cfg.Logger, slog.Default()),
		history:       cfg.History,
		secrets:       cfg.Secrets,
		insecureClear: cfg.InsecureClearSecrets,
		sourceTimeout: cmp.Or(cfg.SourceTimeout, 5*time.Second),
		destination:   cfg.Destination,
		sourceState:   cfg.SourceState,
	}, nil
}

// sourceTopics lists the source's topics, turning any failure into an
// *UnavailableError that names the bootstrap servers.
func (s *Service) sourceTopics(ctx context.Context, conn kafkaconn.Config) (map[string]int32, error) {
	topics, err := s.catalog.TopicPartitions(ctx, conn)
	if err != nil {
		return nil, sourceUnavailable(conn, err)
	}
	return topics, nil
}

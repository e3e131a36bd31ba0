// Package repo is kmirror's Postgres access: one pgx pool, one transaction
// helper, and noun-first query functions that take a DBTX so they run the
// same inside or outside a transaction.
package repo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"
)

// Errors returned by repo functions, translated from pgx and SQLSTATEs.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	// ErrUnavailable: the database could not be reached, or did not
	// answer in time.
	ErrUnavailable = errors.New("database unavailable")
	// ErrInvalidText: a value PostgreSQL cannot store as text or jsonb (a
	// NUL byte, invalid UTF-8): bad input, not a server fault.
	ErrInvalidText = errors.New("text cannot be stored")
)

// DBTX is what the query functions need: a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Open connects a pool and checks that the database answers. Pool
// settings come from the URL (pool_max_conns, ...), as pgx documents.
func Open(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	return OpenWith(ctx, databaseURL, OpenParams{})
}

// OpenParams shape a pool beyond what its URL says.
type OpenParams struct {
	// MaxConns, when set, caps the pool whatever the URL says: a small
	// pool of its own keeps one kind of work from waiting on another.
	MaxConns int32
	// DefaultMaxConns, when set, sizes the pool unless the URL sets
	// pool_max_conns; the pool then also keeps that many connections open
	// (unless the URL sets pool_min_conns).
	DefaultMaxConns int32
	// Warm runs WarmConn on every new connection before the pool hands it
	// out: for the data pool, whose connections partitions use at once.
	Warm bool
}

// connectTimeout and pingTimeout bound a new connection and the health
// check of an idle one when the caller's context has no deadline.
const (
	connectTimeout = 10 * time.Second
	pingTimeout    = 5 * time.Second
)

// DataPoolConns is the default size of an instance's data-plane pool
// (partition workers, metadata sync, relay, notifier). At pgx's default,
// four on a small machine, the pool is the bottleneck of many partitions
// starting at once: every state change is a short transaction, and most
// acquires would wait. They are opened at start and kept: opened on demand
// (a fork each on the server), they would stagger the first partitions of
// a new mirror.
const DataPoolConns = 12

// OpenWith is Open with params.
func OpenWith(ctx context.Context, databaseURL string, p OpenParams) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if p.DefaultMaxConns > 0 && !strings.Contains(databaseURL, "pool_max_conns") {
		cfg.MaxConns = p.DefaultMaxConns
		if !strings.Contains(databaseURL, "pool_min_conns") {
			cfg.MinConns = p.DefaultMaxConns
		}
	}
	if p.MaxConns > 0 {
		cfg.MaxConns = p.MaxConns
		cfg.MinConns = min(cfg.MinConns, p.MaxConns)
	}
	// A Postgres that hangs (a network that drops packets) must not hold a
	// connect or a health ping, and with them the pool's Close, for ever:
	// the URL's connect_timeout wins when it sets one.
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	cfg.PingTimeout = pingTimeout
	// A connection to a server that has become a hot standby refuses every
	// write: dropped when released, so that the next one is opened where
	// the URL's target_session_attrs finds a primary.
	cfg.AfterRelease = func(c *pgx.Conn) bool { return !hotStandby(c) }
	if p.Warm {
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			WarmConn(ctx, c)
			return nil
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database did not answer: %w", err)
	}
	return pool, nil
}

// hotStandby says whether the connection's server reports itself a hot
// standby (PostgreSQL 14 and later report in_hot_standby, and report it
// again when a promotion ends recovery).
func hotStandby(c *pgx.Conn) bool {
	return c.PgConn().ParameterStatus("in_hot_standby") == "on"
}

// PingWritable checks that the pool reaches a database that takes writes:
// it answers, and not as a read-only hot standby.
func PingWritable(ctx context.Context, pool *pgxpool.Pool) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return interpret(err)
	}
	defer c.Release()
	if err := c.Ping(ctx); err != nil {
		return interpret(err)
	}
	if hotStandby(c.Conn()) {
		return fmt.Errorf("%w: the server is a read-only hot standby", ErrUnavailable)
	}
	return nil
}

// WithTx runs fn in a transaction, committing when it returns nil. The
// rollback runs without the caller's cancellation so a cancelled request
// never leaves a transaction open on a pooled connection.
func WithTx(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return interpret(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return interpret(tx.Commit(ctx))
}

// interpret turns driver errors into the package's errors.
func interpret(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505": // unique_violation
			return fmt.Errorf("%w: %s", ErrConflict, pgErr.ConstraintName)
		case pgErr.Code == "23503": // foreign_key_violation: the parent row is gone
			return fmt.Errorf("%w: %s", ErrNotFound, pgErr.ConstraintName)
		case pgErr.Code == "22021", pgErr.Code == "22P05":
			// character_not_in_repertoire (a NUL or invalid UTF-8 in text),
			// untranslatable_character (\u0000 in jsonb)
			return fmt.Errorf("%w: %s", ErrInvalidText, pgErr.Message)
		case strings.HasPrefix(pgErr.Code, "08"), strings.HasPrefix(pgErr.Code, "57P"), pgErr.Code == "25006":
			// connection exceptions; the server shutting down or starting
			// up; read_only_sql_transaction: a standby, or a primary being
			// demoted in a failover, until the pool finds the new primary
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// unavailable reports an error of reaching the database rather than of a
// statement: no connection, a broken one, or no answer in time.
func unavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, puddle.ErrClosedPool)
}

// Now is the database's clock, which every instance shares.
func Now(ctx context.Context, q DBTX) (time.Time, error) {
	var now time.Time
	err := q.QueryRow(ctx, `SELECT now()`).Scan(&now)
	return now, interpret(err)
}

// AdvisoryTryLock takes a session-level advisory lock on q's connection
// (it must be one connection, not a pool) and reports whether it got it.
func AdvisoryTryLock(ctx context.Context, q DBTX, key int64) (bool, error) {
	var got bool
	err := q.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got)
	return got, interpret(err)
}

// AdvisoryUnlock releases a lock that AdvisoryTryLock took on q.
func AdvisoryUnlock(ctx context.Context, q DBTX, key int64) error {
	_, err := q.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key)
	return interpret(err)
}

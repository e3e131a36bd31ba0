// Package repo is kmirror's Postgres access: one pgx pool, one transaction
// helper, and noun-first query functions that take a DBTX so they run the
// same inside or outside a transaction.
package repo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors returned by repo functions, translated from pgx and SQLSTATEs.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
)

// DBTX is what the query functions need: a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Open connects a pool and checks that the database answers.
func Open(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
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
		switch pgErr.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%w: %s", ErrConflict, pgErr.ConstraintName)
		case "23503": // foreign_key_violation: the parent row is gone
			return fmt.Errorf("%w: %s", ErrNotFound, pgErr.ConstraintName)
		}
	}
	return err
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

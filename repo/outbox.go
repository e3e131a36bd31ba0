package repo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// OutboxRow is one pending or published record for __mirror_state.
type OutboxRow struct {
	ID          int64
	Mirror      string
	Key         string
	Value       json.RawMessage // nil is a tombstone
	CreatedAt   time.Time
	PublishedAt *time.Time
}

// OutboxInsert queues a record for __mirror_state in the caller's
// transaction. A nil value queues a tombstone. The value must already be
// free of secrets.
func OutboxInsert(ctx context.Context, q DBTX, mirror, key string, value any) error {
	var raw []byte
	if value != nil {
		b, err := json.Marshal(value)
		if err != nil {
			return fmt.Errorf("encode outbox value for %s: %w", key, err)
		}
		raw = b
	}
	_, err := q.Exec(ctx, `INSERT INTO outbox (mirror, key, value) VALUES ($1, $2, $3)`,
		mirror, key, raw)
	return interpret(err)
}

// OutboxListParams selects outbox rows.
type OutboxListParams struct {
	Mirror          string
	UnpublishedOnly bool
	Limit           int
}

// OutboxList returns outbox rows oldest first.
func OutboxList(ctx context.Context, q DBTX, p OutboxListParams) ([]OutboxRow, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	// The unpublished rows' condition is written out, not a parameter:
	// only then can a prepared statement's generic plan use the partial
	// index on them. With a parameter, each relay poll walked every row
	// ever published.
	sql := `SELECT id, mirror, key, value, created_at, published_at FROM outbox
		WHERE ($1 = '' OR mirror = $1) ORDER BY id LIMIT $2`
	if p.UnpublishedOnly {
		sql = `SELECT id, mirror, key, value, created_at, published_at FROM outbox
		WHERE ($1 = '' OR mirror = $1) AND published_at IS NULL ORDER BY id LIMIT $2`
	}
	rows, err := q.Query(ctx, sql, p.Mirror, p.Limit)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []OutboxRow
	for rows.Next() {
		var r OutboxRow
		if err := rows.Scan(&r.ID, &r.Mirror, &r.Key, &r.Value, &r.CreatedAt, &r.PublishedAt); err != nil {
			return nil, interpret(err)
		}
		out = append(out, r)
	}
	return out, interpret(rows.Err())
}

// OutboxMarkPublished marks rows as published once __mirror_state
// acknowledged them.
func OutboxMarkPublished(ctx context.Context, q DBTX, ids []int64) error {
	_, err := q.Exec(ctx, `UPDATE outbox SET published_at = now() WHERE id = ANY($1)`, ids)
	return interpret(err)
}

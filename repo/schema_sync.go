package repo

import (
	"context"
	"encoding/json"
)

// MirrorsSchemaSync returns a mirror's last Schema Registry sync result,
// nil before the first one.
func MirrorsSchemaSync(ctx context.Context, q DBTX, name string) (json.RawMessage, error) {
	var res json.RawMessage
	err := q.QueryRow(ctx, `SELECT schema_sync FROM mirrors WHERE name = $1`, name).Scan(&res)
	return res, interpret(err)
}

// MirrorsSchemaSyncForUpdate is MirrorsSchemaSync, locking the mirror's row
// for the transaction that stores the next result.
func MirrorsSchemaSyncForUpdate(ctx context.Context, q DBTX, name string) (json.RawMessage, error) {
	var res json.RawMessage
	err := q.QueryRow(ctx, `SELECT schema_sync FROM mirrors WHERE name = $1 FOR UPDATE`, name).Scan(&res)
	return res, interpret(err)
}

// MirrorsSaveSchemaSync stores a Schema Registry sync result (nil clears
// it) while owner still holds the mirror's metadata-sync lease at epoch;
// ErrNotFound means the lease moved on. Like MirrorsSaveLastSync it leaves
// updated_at alone.
func MirrorsSaveSchemaSync(ctx context.Context, q DBTX, name, owner string, epoch int64, result json.RawMessage) error {
	tag, err := q.Exec(ctx, `UPDATE mirrors SET schema_sync = $4
		WHERE name = $1 AND meta_lease_owner = $2 AND meta_lease_epoch = $3`, name, owner, epoch, result)
	if err != nil {
		return interpret(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

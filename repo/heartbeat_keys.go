package repo

import (
	"context"
	"time"
)

// HeartbeatKeyRow is one key of heartbeat_keys (migration 000026).
type HeartbeatKeyRow struct {
	ID  int64
	Key []byte
	// Signs is true when the key may sign already (signs_from has passed,
	// by the database's clock).
	Signs bool
}

// HeartbeatKeysList returns every heartbeat key, oldest first.
func HeartbeatKeysList(ctx context.Context, q DBTX) ([]HeartbeatKeyRow, error) {
	rows, err := q.Query(ctx, `SELECT id, key, signs_from <= now() FROM heartbeat_keys ORDER BY id`)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var keys []HeartbeatKeyRow
	for rows.Next() {
		var k HeartbeatKeyRow
		if err := rows.Scan(&k.ID, &k.Key, &k.Signs); err != nil {
			return nil, interpret(err)
		}
		keys = append(keys, k)
	}
	return keys, interpret(rows.Err())
}

// HeartbeatKeysRotate adds key, to sign after delay, and deletes the keys
// that no instance has signed with for longer than retire: those followed
// by a key that has been signing for that long. It returns the new key's id.
func HeartbeatKeysRotate(ctx context.Context, q DBTX, key []byte, delay, retire time.Duration) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, `INSERT INTO heartbeat_keys (key, signs_from)
		VALUES ($1, now() + $2 * interval '1 microsecond') RETURNING id`, key, delay.Microseconds()).Scan(&id)
	if err != nil {
		return 0, interpret(err)
	}
	_, err = q.Exec(ctx, `DELETE FROM heartbeat_keys k WHERE EXISTS (
		SELECT 1 FROM heartbeat_keys n WHERE n.id > k.id
		  AND n.signs_from < now() - $1 * interval '1 microsecond')`, retire.Microseconds())
	return id, interpret(err)
}

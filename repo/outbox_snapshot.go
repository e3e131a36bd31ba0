package repo

import "context"

// The reads of a __mirror_state snapshot (service.QueueStateSnapshot): the
// current rows behind every mirror, topic and synced-ACL record, read under
// locks that order the snapshot's outbox rows after every change they
// reflect and before every change they do not.

// MirrorsListForShare returns every mirror by name and locks each row FOR
// SHARE until the transaction ends. Every writer of a mirror's or its
// topics' records locks the mirror row FOR UPDATE before it queues them, so
// this waits for writers in flight (and then reads what they committed) and
// holds off the next ones until the snapshot's rows are queued. Rows are
// locked in primary-key order, as every statement that locks many does.
func MirrorsListForShare(ctx context.Context, q DBTX) ([]Mirror, error) {
	return collectMirrors(q.Query(ctx, `SELECT `+mirrorColumns+` FROM mirrors ORDER BY name FOR SHARE`))
}

// TopicsListAll returns every mirror's topics by mirror and name.
func TopicsListAll(ctx context.Context, q DBTX) ([]Topic, error) {
	return collectTopics(q.Query(ctx, topicSelect+` ORDER BY t.mirror, t.topic`))
}

// SyncedACLsLockListAll locks synced_acls against writes until the
// transaction ends, then returns every mirror's set. The sync writes a set
// and queues its record without locking the mirror row, so only the table
// lock (SHARE waits for the writers in flight and holds off the next) keeps
// a snapshot's set from landing after a newer one.
func SyncedACLsLockListAll(ctx context.Context, q DBTX) (map[string][]SyncedACL, error) {
	if _, err := q.Exec(ctx, `LOCK TABLE synced_acls IN SHARE MODE`); err != nil {
		return nil, interpret(err)
	}
	rows, err := q.Query(ctx, `SELECT mirror, resource_type, resource_name, pattern_type, principal, host, operation, permission
		FROM synced_acls
		ORDER BY mirror, resource_type, resource_name, pattern_type, principal, host, operation, permission`)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	out := map[string][]SyncedACL{}
	for rows.Next() {
		var m string
		var a SyncedACL
		if err := rows.Scan(&m, &a.ResourceType, &a.ResourceName, &a.PatternType, &a.Principal, &a.Host,
			&a.Operation, &a.Permission); err != nil {
			return nil, interpret(err)
		}
		out[m] = append(out[m], a)
	}
	return out, interpret(rows.Err())
}

// PartitionsCount counts every mirror partition.
func PartitionsCount(ctx context.Context, q DBTX) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM mirror_partitions`).Scan(&n)
	return n, interpret(err)
}

// OutboxRecord is one record to queue with OutboxInsertMany; Value is JSON
// free of secrets (nil: a tombstone).
type OutboxRecord struct {
	Mirror string
	Key    string
	Value  []byte
}

// OutboxInsertMany queues records in one statement; their ids follow the
// order given, so the relay publishes them in that order. It returns the
// first id (0 when recs is empty).
func OutboxInsertMany(ctx context.Context, q DBTX, recs []OutboxRecord) (int64, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	mirrors, keys, values := make([]string, len(recs)), make([]string, len(recs)), make([]*string, len(recs))
	for i, r := range recs {
		mirrors[i], keys[i] = r.Mirror, r.Key
		if r.Value != nil {
			v := string(r.Value)
			values[i] = &v
		}
	}
	var first int64
	err := q.QueryRow(ctx, `WITH ins AS (
			INSERT INTO outbox (mirror, key, value)
			SELECT m, k, v::jsonb FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS r(m, k, v, ord)
			ORDER BY ord
			RETURNING id)
		SELECT min(id) FROM ins`, mirrors, keys, values).Scan(&first)
	return first, interpret(err)
}

// OutboxUnpublished says whether the outbox row id is still waiting for
// the relay; a row that is gone is not.
func OutboxUnpublished(ctx context.Context, q DBTX, id int64) (bool, error) {
	var waiting bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox WHERE id = $1 AND published_at IS NULL)`, id).Scan(&waiting)
	return waiting, interpret(err)
}

// OutboxAnyPublished says whether the relay ever published a row: whether
// __mirror_state existed before, when it is found missing.
func OutboxAnyPublished(ctx context.Context, q DBTX) (bool, error) {
	var any bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox WHERE published_at IS NOT NULL)`).Scan(&any)
	return any, interpret(err)
}

package repo

import (
	"context"
	"encoding/json"
	"time"
)

// MirrorsRequestSync records a "sync now" request for a mirror and returns
// its time (the database's clock). ErrNotFound for an unknown mirror.
func MirrorsRequestSync(ctx context.Context, q DBTX, name string) (time.Time, error) {
	var at time.Time
	err := q.QueryRow(ctx, `UPDATE mirrors SET sync_requested_at = clock_timestamp()
		WHERE name = $1 RETURNING sync_requested_at`, name).Scan(&at)
	return at, interpret(err)
}

// SyncStatus is what a "sync now" request waits on.
type SyncStatus struct {
	// LastSync is the last pass result, nil before the first pass.
	LastSync json.RawMessage
	// Served is true once a pass that started after the request saved its result.
	Served bool
	// LeaseHeld is true while some instance holds the mirror's metadata-sync
	// lease, that is, while some instance runs its passes.
	LeaseHeld bool
}

// MirrorsSyncStatus reports whether a pass has served a request made at
// requestedAt, and whether anyone holds the metadata-sync lease.
func MirrorsSyncStatus(ctx context.Context, q DBTX, name string, requestedAt time.Time) (SyncStatus, error) {
	var s SyncStatus
	err := q.QueryRow(ctx, `SELECT last_sync, coalesce(sync_served_at >= $2, false),
			meta_lease_owner IS NOT NULL AND `+metaLeaseHeld+`
		FROM mirrors WHERE name = $1`, name, requestedAt).Scan(&s.LastSync, &s.Served, &s.LeaseHeld)
	return s, interpret(err)
}

// MirrorsPendingSyncRequests returns, for those of the named mirrors with a
// request no pass has served yet, the time of the latest request.
func MirrorsPendingSyncRequests(ctx context.Context, q DBTX, names []string) (map[string]time.Time, error) {
	rows, err := q.Query(ctx, `SELECT name, sync_requested_at FROM mirrors
		WHERE name = ANY($1) AND sync_requested_at > coalesce(sync_served_at, '-infinity'::timestamptz)`, names)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var name string
		var at time.Time
		if err := rows.Scan(&name, &at); err != nil {
			return nil, interpret(err)
		}
		out[name] = at
	}
	return out, interpret(rows.Err())
}

// MirrorsSaveLastSyncParams is a pass result saved by the holder of the
// mirror's metadata-sync lease.
type MirrorsSaveLastSyncParams struct {
	Name   string
	Owner  string
	Epoch  int64
	Result json.RawMessage
	// Served, when non-nil, is the latest sync request the pass served.
	Served *time.Time
}

// MirrorsSaveLastSync stores a pass result while owner still holds the
// metadata-sync lease at epoch; ErrNotFound means the lease moved on. It
// leaves updated_at alone: that marks changes of the mirror's configuration.
func MirrorsSaveLastSync(ctx context.Context, q DBTX, p MirrorsSaveLastSyncParams) error {
	tag, err := q.Exec(ctx, `UPDATE mirrors SET last_sync = $4,
			sync_served_at = CASE WHEN $5::timestamptz IS NULL THEN sync_served_at
				ELSE greatest(coalesce(sync_served_at, '-infinity'::timestamptz), $5) END
		WHERE name = $1 AND meta_lease_owner = $2 AND meta_lease_epoch = $3`,
		p.Name, p.Owner, p.Epoch, p.Result, p.Served)
	if err != nil {
		return interpret(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// TopicsCountSourceMissing records one sync pass's view of the source: the
// missing topics' counts of consecutive passes go up by one, every other
// topic's goes back to 0. It returns the new count of each missing topic.
func TopicsCountSourceMissing(ctx context.Context, q DBTX, mirror string, missing []string) (map[string]int, error) {
	if missing == nil {
		missing = []string{} // NULL would match no row below
	}
	if _, err := q.Exec(ctx, `UPDATE mirror_topics SET source_missing_passes = 0
		WHERE mirror = $1 AND NOT (topic = ANY($2)) AND source_missing_passes <> 0`, mirror, missing); err != nil {
		return nil, interpret(err)
	}
	out := map[string]int{}
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `UPDATE mirror_topics SET source_missing_passes = source_missing_passes + 1
		WHERE mirror = $1 AND topic = ANY($2) RETURNING topic, source_missing_passes`, mirror, missing)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	for rows.Next() {
		var topic string
		var n int
		if err := rows.Scan(&topic, &n); err != nil {
			return nil, interpret(err)
		}
		out[topic] = n
	}
	return out, interpret(rows.Err())
}

// PartitionsInsertMissing adds the partition rows a topic lacks up to
// partitions in all, and returns the partitions it added.
func PartitionsInsertMissing(ctx context.Context, q DBTX, mirror, topic string, partitions int32) ([]int32, error) {
	rows, err := q.Query(ctx, `
		INSERT INTO mirror_partitions (mirror, topic, partition)
		SELECT $1, $2, g FROM generate_series(0, $3::int - 1) AS g
		ON CONFLICT DO NOTHING
		RETURNING partition`, mirror, topic, partitions)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []int32
	for rows.Next() {
		var p int32
		if err := rows.Scan(&p); err != nil {
			return nil, interpret(err)
		}
		out = append(out, p)
	}
	return out, interpret(rows.Err())
}

// SyncedACL is an ACL the metadata sync created on the destination, with
// Kafka's names for each field (TOPIC, LITERAL, READ, ALLOW).
type SyncedACL struct {
	ResourceType string
	ResourceName string
	PatternType  string
	Principal    string
	Host         string
	Operation    string
	Permission   string
}

// SyncedACLsList returns the ACLs the sync of a mirror created.
func SyncedACLsList(ctx context.Context, q DBTX, mirror string) ([]SyncedACL, error) {
	rows, err := q.Query(ctx, `SELECT resource_type, resource_name, pattern_type, principal, host, operation, permission
		FROM synced_acls WHERE mirror = $1
		ORDER BY resource_type, resource_name, pattern_type, principal, host, operation, permission`, mirror)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []SyncedACL
	for rows.Next() {
		var a SyncedACL
		if err := rows.Scan(&a.ResourceType, &a.ResourceName, &a.PatternType, &a.Principal, &a.Host,
			&a.Operation, &a.Permission); err != nil {
			return nil, interpret(err)
		}
		out = append(out, a)
	}
	return out, interpret(rows.Err())
}

// SyncedACLsInsert records an ACL the sync is about to create; recording it
// first means a crash in between leaves a record of an ACL that may exist,
// never an ACL nobody knows kmirror made.
func SyncedACLsInsert(ctx context.Context, q DBTX, mirror string, a SyncedACL) error {
	_, err := q.Exec(ctx, `INSERT INTO synced_acls (mirror, resource_type, resource_name, pattern_type,
			principal, host, operation, permission)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
		mirror, a.ResourceType, a.ResourceName, a.PatternType, a.Principal, a.Host, a.Operation, a.Permission)
	return interpret(err)
}

// SyncedACLsDelete forgets ACLs the sync created, once they are gone from
// the destination, in one statement.
func SyncedACLsDelete(ctx context.Context, q DBTX, mirror string, acls []SyncedACL) error {
	var cols [7][]string
	for _, a := range acls {
		for i, v := range [7]string{a.ResourceType, a.ResourceName, a.PatternType, a.Principal, a.Host, a.Operation, a.Permission} {
			cols[i] = append(cols[i], v)
		}
	}
	_, err := q.Exec(ctx, `DELETE FROM synced_acls s
		USING unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
			AS d (resource_type, resource_name, pattern_type, principal, host, operation, permission)
		WHERE s.mirror = $1 AND s.resource_type = d.resource_type AND s.resource_name = d.resource_name
			AND s.pattern_type = d.pattern_type AND s.principal = d.principal AND s.host = d.host
			AND s.operation = d.operation AND s.permission = d.permission`,
		mirror, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6])
	return interpret(err)
}

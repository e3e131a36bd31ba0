package repo

import (
	"context"
	"time"
)

// Instance is one kmirror server process sharing this database.
type Instance struct {
	ID          string
	Hostname    string
	Version     string
	StartedAt   time.Time
	HeartbeatAt time.Time
	StoppedAt   *time.Time
	// Live is computed by the database: heartbeat within the given TTL.
	Live bool
	// Leases counts the partitions whose lease this instance's live
	// session holds.
	Leases int
}

// InstancesRegister records a starting instance, reviving a stopped id.
func InstancesRegister(ctx context.Context, q DBTX, id, hostname, version string) error {
	_, err := q.Exec(ctx, `
		INSERT INTO instances (id, hostname, version) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET hostname = excluded.hostname, version = excluded.version,
			started_at = now(), heartbeat_at = now(), stopped_at = NULL`, id, hostname, version)
	return interpret(err)
}

// InstancesHeartbeat marks an instance alive now.
func InstancesHeartbeat(ctx context.Context, q DBTX, id string) error {
	tag, err := q.Exec(ctx, `UPDATE instances SET heartbeat_at = now(), stopped_at = NULL WHERE id = $1`, id)
	if err != nil {
		return interpret(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// InstancesStop marks an instance as cleanly stopped.
func InstancesStop(ctx context.Context, q DBTX, id string) error {
	_, err := q.Exec(ctx, `UPDATE instances SET stopped_at = now() WHERE id = $1`, id)
	return interpret(err)
}

// InstancesList returns every known instance; Live uses ttl against the
// database clock. Leases are counted in one grouped pass over the leased
// partitions: a lease counts while its owner's session is the one that took
// it and has not expired (migration 000007).
func InstancesList(ctx context.Context, q DBTX, ttl time.Duration) ([]Instance, error) {
	rows, err := q.Query(ctx, `SELECT i.id, i.hostname, i.version, i.started_at, i.heartbeat_at, i.stopped_at,
			i.stopped_at IS NULL AND i.heartbeat_at > now() - $1::interval,
			CASE WHEN i.session_expires_at > now() THEN coalesce(l.leases, 0) ELSE 0 END
		FROM instances i
		LEFT JOIN (
			SELECT lease_owner, lease_session, count(*) AS leases FROM mirror_partitions
			WHERE lease_owner IS NOT NULL GROUP BY 1, 2
		) l ON l.lease_owner = i.id AND l.lease_session = i.session_epoch
		ORDER BY i.id`, ttl.String())
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []Instance
	for rows.Next() {
		var i Instance
		if err := rows.Scan(&i.ID, &i.Hostname, &i.Version, &i.StartedAt, &i.HeartbeatAt,
			&i.StoppedAt, &i.Live, &i.Leases); err != nil {
			return nil, interpret(err)
		}
		out = append(out, i)
	}
	return out, interpret(rows.Err())
}

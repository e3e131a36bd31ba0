package repo

import (
	"context"
	"time"
)

// Instance is one kmirror server process sharing this database.
type Instance struct {
	ID        string
	Hostname  string
	Version   string
	StartedAt time.Time
	// RenewedAt is when its session was last renewed (or opened), its start
	// before it had one.
	RenewedAt time.Time
	StoppedAt *time.Time
	// Live: not stopped, and its session has not expired.
	Live bool
	// TakesLeases is false for an instance that runs only the control plane.
	TakesLeases bool
	// Leases counts the partitions whose lease this instance's live
	// session holds.
	Leases int
}

// InstancesRegister records a starting instance, reviving a stopped id.
// takesLeases is false for one that runs only the control plane: it is
// listed and live, but not counted when leases are shared.
func InstancesRegister(ctx context.Context, q DBTX, id, hostname, version string, takesLeases bool) error {
	_, err := q.Exec(ctx, `
		INSERT INTO instances (id, hostname, version, takes_leases) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET hostname = excluded.hostname, version = excluded.version,
			takes_leases = excluded.takes_leases, started_at = now(), stopped_at = NULL`,
		id, hostname, version, takesLeases)
	return interpret(err)
}

// InstancesStop marks an instance as cleanly stopped.
func InstancesStop(ctx context.Context, q DBTX, id string) error {
	_, err := q.Exec(ctx, `UPDATE instances SET stopped_at = now() WHERE id = $1`, id)
	return interpret(err)
}

// InstancesList returns every known instance; Live uses the database
// clock. Leases are counted in one grouped pass over the leased
// partitions: a lease counts while its owner's session is the one that took
// it and has not expired (migration 000007).
func InstancesList(ctx context.Context, q DBTX) ([]Instance, error) {
	rows, err := q.Query(ctx, `SELECT i.id, i.hostname, i.version, i.started_at,
			coalesce(i.session_renewed_at, i.started_at), i.stopped_at,
			i.stopped_at IS NULL AND coalesce(i.session_expires_at > now(), false), i.takes_leases,
			CASE WHEN i.session_expires_at > now() THEN coalesce(l.leases, 0) ELSE 0 END
		FROM instances i
		LEFT JOIN (
			SELECT lease_owner, lease_session, count(*) AS leases FROM mirror_partitions
			WHERE lease_owner IS NOT NULL GROUP BY 1, 2
		) l ON l.lease_owner = i.id AND l.lease_session = i.session_epoch
		ORDER BY i.id`)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []Instance
	for rows.Next() {
		var i Instance
		if err := rows.Scan(&i.ID, &i.Hostname, &i.Version, &i.StartedAt, &i.RenewedAt,
			&i.StoppedAt, &i.Live, &i.TakesLeases, &i.Leases); err != nil {
			return nil, interpret(err)
		}
		out = append(out, i)
	}
	return out, interpret(rows.Err())
}

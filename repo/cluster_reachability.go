package repo

import (
	"context"
	"time"
)

// Reachability is what a probe of a Kafka cluster last found.
type Reachability struct {
	Reachable bool
	// Since is when the answer last changed (the database's clock).
	Since time.Time
	// Error is the last failed probe's error; "" while reachable.
	Error string
}

// MirrorsSaveSourceReachabilityParams is a probe's answer about a mirror's
// source, saved by the holder of the mirror's metadata lease.
type MirrorsSaveSourceReachabilityParams struct {
	Name  string
	Owner string
	Epoch int64
	Reachability
}

// MirrorsSaveSourceReachability records whether the mirror's source
// answers, while owner holds the mirror's metadata lease at epoch;
// ErrNotFound means the lease moved on (or the mirror is gone). Since moves
// only when the answer changes. It leaves updated_at alone: that marks
// changes of the mirror's configuration.
func MirrorsSaveSourceReachability(ctx context.Context, q DBTX, p MirrorsSaveSourceReachabilityParams) error {
	tag, err := q.Exec(ctx, `UPDATE mirrors SET
			source_reachable_since = CASE WHEN source_reachable IS DISTINCT FROM $4
				THEN now() ELSE source_reachable_since END,
			source_reachable = $4, source_reachability_error = nullif($5, ''),
			source_reachability_owner = $2, source_reachability_epoch = $3
		WHERE name = $1 AND meta_lease_owner = $2 AND meta_lease_epoch = $3`,
		p.Name, p.Owner, p.Epoch, p.Reachable, p.Error)
	if err != nil {
		return interpret(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// InstancesSaveDestinationReachability records whether the destination
// answers this instance's probes. Since moves only when the answer changes.
func InstancesSaveDestinationReachability(ctx context.Context, q DBTX, id string, r Reachability) error {
	tag, err := q.Exec(ctx, `UPDATE instances SET
			destination_reachable_since = CASE WHEN destination_reachable IS DISTINCT FROM $2
				THEN now() ELSE destination_reachable_since END,
			destination_reachable = $2, destination_reachability_error = nullif($3, '')
		WHERE id = $1`, id, r.Reachable, r.Error)
	if err != nil {
		return interpret(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// ClusterReachabilityRow is one known answer about a cluster: a mirror's
// source (Mirror set) or the destination as one instance sees it (Instance
// set).
type ClusterReachabilityRow struct {
	Mirror   string
	Instance string
	Reachability
}

// ClusterReachabilityList returns, in one query, what is known of every
// mirror's source (or of the one named, when mirror is not "") and of the
// destination as each instance sees it, sources first by mirror, then
// instances by id. A value counts only while whoever recorded it still
// probes: a source's while its recorder holds the mirror's metadata lease
// at the epoch it recorded under, a destination's while its instance's
// session is live. What is missing is unknown.
func ClusterReachabilityList(ctx context.Context, q DBTX, mirror string) ([]ClusterReachabilityRow, error) {
	rows, err := q.Query(ctx, `
		SELECT name, '', source_reachable, source_reachable_since, coalesce(source_reachability_error, '')
		FROM mirrors
		WHERE ($1 = '' OR name = $1) AND source_reachable IS NOT NULL
			AND meta_lease_owner = source_reachability_owner AND meta_lease_epoch = source_reachability_epoch
			AND `+metaLeaseHeld+`
		UNION ALL
		SELECT '', id, destination_reachable, destination_reachable_since, coalesce(destination_reachability_error, '')
		FROM instances
		WHERE destination_reachable IS NOT NULL AND session_expires_at > now()
		ORDER BY 2, 1`, mirror)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []ClusterReachabilityRow
	for rows.Next() {
		var r ClusterReachabilityRow
		if err := rows.Scan(&r.Mirror, &r.Instance, &r.Reachable, &r.Since, &r.Error); err != nil {
			return nil, interpret(err)
		}
		out = append(out, r)
	}
	return out, interpret(rows.Err())
}

// MirrorsExisting returns those of names that are still mirrors.
func MirrorsExisting(ctx context.Context, q DBTX, names []string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT name FROM mirrors WHERE name = ANY($1)`, names)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, interpret(err)
		}
		out = append(out, n)
	}
	return out, interpret(rows.Err())
}

package repo

import "context"

// MirrorStateCount is one (mirror, state) group of a mirror's partitions,
// with the mirror's topic count repeated on each of its rows.
type MirrorStateCount struct {
	Mirror string
	Topics int
	// State is "UNKNOWN" for partitions with no state yet, and "" on the
	// one row of a mirror that has no partitions.
	State      string
	Partitions int
	// Lag sums source end offset − src_next, floored at 0 per partition,
	// over the partitions whose source end is known.
	Lag int64
	// Erroring counts partitions with a non-empty error.
	Erroring int
	// ThrottledMs sums the partitions' throttled_ms: how long their copies
	// have waited for the mirror's replication throttle.
	ThrottledMs int64
	// Realigning counts the partitions their new owner is re-aligning
	// after taking them over: Partition.Realigning, in SQL.
	Realigning int
	// MaxLagMs is the largest lag in time (LagMsSQL) of the group's
	// partitions whose lag in time is known; nil when none is.
	MaxLagMs *int64
}

// MirrorsStatus groups the partitions of every mirror (or of the one named,
// when mirror is not "") by state in one query, ordered by mirror and state.
// Every mirror has at least one row.
func MirrorsStatus(ctx context.Context, q DBTX, mirror string) ([]MirrorStateCount, error) {
	rows, err := q.Query(ctx, `
		WITH parts AS (
			SELECT mirror, coalesce(state, 'UNKNOWN') AS state, count(*) AS partitions,
				coalesce(sum(greatest(source_end_offset - coalesce(src_next, 0), 0))
					FILTER (WHERE source_end_offset IS NOT NULL), 0)::bigint AS lag,
				count(*) FILTER (WHERE coalesce(error, '') <> '') AS erroring,
				sum(throttled_ms)::bigint AS throttled_ms,
				count(*) FILTER (WHERE state IN ('MIRRORING', 'PAUSING', 'STOPPING')
					AND coalesce(lease_owner, '') <> '' AND coalesce(aligned_epoch, 0) <> lease_epoch) AS realigning,
				max(`+LagMsSQL+`) AS max_lag_ms
			FROM mirror_partitions WHERE ($1 = '' OR mirror = $1) GROUP BY 1, 2
		), topics AS (
			SELECT mirror, count(*) AS topics FROM mirror_topics WHERE ($1 = '' OR mirror = $1) GROUP BY 1
		)
		SELECT m.name, coalesce(t.topics, 0), coalesce(p.state, ''), coalesce(p.partitions, 0),
			coalesce(p.lag, 0), coalesce(p.erroring, 0), coalesce(p.throttled_ms, 0),
			coalesce(p.realigning, 0), p.max_lag_ms
		FROM mirrors m
		LEFT JOIN topics t ON t.mirror = m.name
		LEFT JOIN parts p ON p.mirror = m.name
		WHERE ($1 = '' OR m.name = $1)
		ORDER BY 1, 3`, mirror)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []MirrorStateCount
	for rows.Next() {
		var c MirrorStateCount
		if err := rows.Scan(&c.Mirror, &c.Topics, &c.State, &c.Partitions, &c.Lag, &c.Erroring, &c.ThrottledMs, &c.Realigning, &c.MaxLagMs); err != nil {
			return nil, interpret(err)
		}
		out = append(out, c)
	}
	return out, interpret(rows.Err())
}

// PartitionsMaxLagMs returns the largest known lag in time (LagMsSQL) of
// a mirror's partitions of the named topics; nil when none is known.
func PartitionsMaxLagMs(ctx context.Context, q DBTX, mirror string, topics []string) (*int64, error) {
	var v *int64
	err := q.QueryRow(ctx, `SELECT max(`+LagMsSQL+`) FROM mirror_partitions
		WHERE mirror = $1 AND topic = ANY($2)`, mirror, topics).Scan(&v)
	return v, interpret(err)
}

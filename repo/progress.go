package repo

import "context"

// TopicProgress is one mirror topic's progress at one moment, summed over
// its partitions.
type TopicProgress struct {
	Mirror string
	// Topic is "" for a mirror that has no partitions: it is listed all the
	// same, so that every mirror has a total.
	Topic string
	// SrcNext sums the next source offset to mirror (NULL counts 0): how
	// far it moves between two samples is how many records were mirrored.
	SrcNext int64
	// Lag sums source end offset − src_next, floored at 0 per partition,
	// over the partitions whose source end is known.
	Lag int64
	// MaxLagMs is the largest known lag in time (LagMsSQL) of the topic's
	// partitions; nil when none is known.
	MaxLagMs *int64
}

// PartitionsProgress sums every mirror topic's checkpoints and lag in one
// grouped query, ordered by mirror and topic.
func PartitionsProgress(ctx context.Context, q DBTX) ([]TopicProgress, error) {
	rows, err := q.Query(ctx, `
		SELECT m.name, coalesce(p.topic, ''),
			coalesce(sum(coalesce(p.src_next, 0)), 0)::bigint,
			coalesce(sum(greatest(p.source_end_offset - coalesce(p.src_next, 0), 0))
				FILTER (WHERE p.source_end_offset IS NOT NULL), 0)::bigint,
			max(`+LagMsSQL+`)
		FROM mirrors m LEFT JOIN mirror_partitions p ON p.mirror = m.name
		GROUP BY m.name, p.topic ORDER BY 1, 2`)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []TopicProgress
	for rows.Next() {
		var tp TopicProgress
		if err := rows.Scan(&tp.Mirror, &tp.Topic, &tp.SrcNext, &tp.Lag, &tp.MaxLagMs); err != nil {
			return nil, interpret(err)
		}
		out = append(out, tp)
	}
	return out, interpret(rows.Err())
}

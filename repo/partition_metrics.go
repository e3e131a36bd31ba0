package repo

import "context"

// PartitionStateCount is one (mirror, topic, state) group of
// mirror_partitions, as the metrics scrape reads it.
type PartitionStateCount struct {
	Mirror string
	Topic  string
	// State is "UNKNOWN" for partitions with no state yet.
	State      string
	Partitions int64
	// Lag sums source end offset − next source offset, floored at 0 per
	// partition; partitions with no known end count 0.
	Lag         int64
	LostRecords int64
	// Erroring counts partitions with an error, FAILED or still retrying.
	Erroring int64
	// MaxLagMs is the largest known lag in time (LagMsSQL) of the group's
	// partitions; nil when none is known.
	MaxLagMs *int64
}

// PartitionsCountByState groups every partition by mirror, topic and state,
// in that order, in one query: the scrape reports the whole deployment
// whoever holds the leases.
func PartitionsCountByState(ctx context.Context, q DBTX) ([]PartitionStateCount, error) {
	rows, err := q.Query(ctx, `
		SELECT mirror, topic, coalesce(state, 'UNKNOWN'), count(*),
			coalesce(sum(greatest(source_end_offset - coalesce(src_next, 0), 0)), 0), sum(lost_records),
			count(*) FILTER (WHERE error IS NOT NULL), max(`+LagMsSQL+`)
		FROM mirror_partitions GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []PartitionStateCount
	for rows.Next() {
		var c PartitionStateCount
		if err := rows.Scan(&c.Mirror, &c.Topic, &c.State, &c.Partitions, &c.Lag, &c.LostRecords, &c.Erroring, &c.MaxLagMs); err != nil {
			return nil, interpret(err)
		}
		out = append(out, c)
	}
	return out, interpret(rows.Err())
}

// OutboxBacklog counts the outbox rows not yet published to __mirror_state
// and the age in seconds of the oldest (0 when none), through the partial
// index of unpublished rows.
func OutboxBacklog(ctx context.Context, q DBTX) (rows int64, oldestAge float64, err error) {
	err = q.QueryRow(ctx, `
		SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
		FROM outbox WHERE published_at IS NULL`).Scan(&rows, &oldestAge)
	return rows, oldestAge, interpret(err)
}

// PartitionLag is one partition's lag, as the metrics scrape reads it.
type PartitionLag struct {
	Mirror    string
	Topic     string
	Partition int32
	Lag       int64
}

// PartitionsLag returns every partition's lag (source end offset − next
// source offset, floored at 0; 0 when the end is unknown), ordered by
// mirror, topic and partition.
func PartitionsLag(ctx context.Context, q DBTX) ([]PartitionLag, error) {
	rows, err := q.Query(ctx, `
		SELECT mirror, topic, partition,
			coalesce(greatest(source_end_offset - coalesce(src_next, 0), 0), 0)
		FROM mirror_partitions ORDER BY 1, 2, 3`)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []PartitionLag
	for rows.Next() {
		var l PartitionLag
		if err := rows.Scan(&l.Mirror, &l.Topic, &l.Partition, &l.Lag); err != nil {
			return nil, interpret(err)
		}
		out = append(out, l)
	}
	return out, interpret(rows.Err())
}

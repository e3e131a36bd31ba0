package repo

import "context"

// OffsetRun maps Count consecutive mirrored source records starting at
// SrcStart to destination offsets starting at DstStart.
type OffsetRun struct {
	SrcStart int64
	DstStart int64
	Count    int64
}

// OffsetRunsAround returns the run at or before srcOffset and the run after
// it, either of which may be nil. Translation needs no more than these two.
func OffsetRunsAround(ctx context.Context, q DBTX, mirror, topic string, partition int32, srcOffset int64) (before, after *OffsetRun, err error) {
	rows, err := q.Query(ctx, `
		(SELECT src_start, dst_start, count, true FROM offset_map_runs
		 WHERE mirror = $1 AND topic = $2 AND partition = $3 AND src_start <= $4
		 ORDER BY src_start DESC LIMIT 1)
		UNION ALL
		(SELECT src_start, dst_start, count, false FROM offset_map_runs
		 WHERE mirror = $1 AND topic = $2 AND partition = $3 AND src_start > $4
		 ORDER BY src_start LIMIT 1)`, mirror, topic, partition, srcOffset)
	if err != nil {
		return nil, nil, interpret(err)
	}
	defer rows.Close()
	for rows.Next() {
		var r OffsetRun
		var isBefore bool
		if err := rows.Scan(&r.SrcStart, &r.DstStart, &r.Count, &isBefore); err != nil {
			return nil, nil, interpret(err)
		}
		if isBefore {
			before = &r
		} else {
			after = &r
		}
	}
	return before, after, interpret(rows.Err())
}

// OffsetRunsFrom asks for a partition's runs from the chunk (of Width
// source offsets) holding the run at or before Src; a negative Src asks for
// every run.
type OffsetRunsFrom struct {
	ID  PartitionID
	Src int64
}

// OffsetRunsRead is what OffsetRunsListFrom read of one partition: its
// runs that start at or after FromSrc, in source order.
type OffsetRunsRead struct {
	FromSrc int64
	Runs    []OffsetRun
}

// OffsetRunsListFrom reads, in one statement, each asked partition's runs
// from the start of the chunk (of width source offsets) that holds its run
// at or before Src (from 0 when there is none): what of the offset map may
// have changed since a checkpoint at Src.
func OffsetRunsListFrom(ctx context.Context, q DBTX, from []OffsetRunsFrom, width int64) (map[PartitionID]OffsetRunsRead, error) {
	mirrors, topics, parts, srcs := make([]string, len(from)), make([]string, len(from)), make([]int32, len(from)), make([]int64, len(from))
	for i, f := range from {
		mirrors[i], topics[i], parts[i], srcs[i] = f.ID.Mirror, f.ID.Topic, f.ID.Partition, f.Src
	}
	rows, err := q.Query(ctx, `
		WITH v AS (
			SELECT v.m, v.t, v.p, coalesce((SELECT max(b.src_start) FROM offset_map_runs b
				WHERE b.mirror = v.m AND b.topic = v.t AND b.partition = v.p AND b.src_start <= v.s), 0) / $5 * $5 AS lo
			FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[]) AS v(m, t, p, s)
		)
		SELECT v.m, v.t, v.p, v.lo, r.src_start, r.dst_start, r.count
		FROM v LEFT JOIN offset_map_runs r
			ON r.mirror = v.m AND r.topic = v.t AND r.partition = v.p AND r.src_start >= v.lo
		ORDER BY v.m, v.t, v.p, r.src_start`, mirrors, topics, parts, srcs, width)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	out := map[PartitionID]OffsetRunsRead{}
	for rows.Next() {
		var id PartitionID
		var lo int64
		var src, dst, n *int64
		if err := rows.Scan(&id.Mirror, &id.Topic, &id.Partition, &lo, &src, &dst, &n); err != nil {
			return nil, interpret(err)
		}
		read := out[id]
		read.FromSrc = lo
		if src != nil {
			read.Runs = append(read.Runs, OffsetRun{SrcStart: *src, DstStart: *dst, Count: *n})
		}
		out[id] = read
	}
	return out, interpret(rows.Err())
}

// OffsetRunsListAll returns every partition's runs in source order.
func OffsetRunsListAll(ctx context.Context, q DBTX) (map[PartitionID][]OffsetRun, error) {
	rows, err := q.Query(ctx, `SELECT mirror, topic, partition, src_start, dst_start, count
		FROM offset_map_runs ORDER BY mirror, topic, partition, src_start`)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	out := map[PartitionID][]OffsetRun{}
	for rows.Next() {
		var id PartitionID
		var r OffsetRun
		if err := rows.Scan(&id.Mirror, &id.Topic, &id.Partition, &r.SrcStart, &r.DstStart, &r.Count); err != nil {
			return nil, interpret(err)
		}
		out[id] = append(out[id], r)
	}
	return out, interpret(rows.Err())
}

// OffsetRunsChunks returns the distinct (topic, partition, src_start / width)
// of a mirror's runs: the offset-map records it has in __mirror_state.
func OffsetRunsChunks(ctx context.Context, q DBTX, mirror string, width int64) (map[PartitionID][]int64, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT topic, partition, src_start / $2 FROM offset_map_runs
		WHERE mirror = $1 ORDER BY 1, 2, 3`, mirror, width)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	out := map[PartitionID][]int64{}
	for rows.Next() {
		id := PartitionID{Mirror: mirror}
		var c int64
		if err := rows.Scan(&id.Topic, &id.Partition, &c); err != nil {
			return nil, interpret(err)
		}
		out[id] = append(out[id], c)
	}
	return out, interpret(rows.Err())
}

// OffsetRunsRestore inserts a partition's runs read back from
// __mirror_state. Like PartitionsRestore it is not fenced: restore fills an
// empty database before any instance runs.
func OffsetRunsRestore(ctx context.Context, q DBTX, id PartitionID, runs []OffsetRun) error {
	src, dst, n := make([]int64, len(runs)), make([]int64, len(runs)), make([]int64, len(runs))
	for i, r := range runs {
		src[i], dst[i], n[i] = r.SrcStart, r.DstStart, r.Count
	}
	_, err := q.Exec(ctx, `INSERT INTO offset_map_runs (mirror, topic, partition, src_start, dst_start, count)
		SELECT $1, $2, $3, s, d, c FROM unnest($4::bigint[], $5::bigint[], $6::bigint[]) AS r(s, d, c)`,
		id.Mirror, id.Topic, id.Partition, src, dst, n)
	return interpret(err)
}

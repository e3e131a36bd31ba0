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

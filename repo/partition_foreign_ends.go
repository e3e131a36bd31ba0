package repo

import (
	"context"
	"time"
)

// staleForeignEndsSQL lists the stale ends of the partitions that
// instances other than $1 lease. Only instances whose session is live or
// expired within a minute can hold a lease that nobody took over yet; when
// there is none (one instance holds everything, and the stopped or long
// dead ones are left), the one-time EXISTS filter ends the statement
// before mirror_partitions is read at all.
const staleForeignEndsSQL = `
	SELECT p.mirror, p.topic, p.partition, coalesce(p.source_end_offset, -1)
	FROM mirror_partitions p
	WHERE EXISTS (SELECT FROM instances i
			WHERE i.id <> $1 AND i.session_expires_at > now() - interval '1 minute')
	  AND p.lease_owner IN (SELECT i.id FROM instances i
			WHERE i.id <> $1 AND i.session_expires_at > now() - interval '1 minute')
	  AND (p.source_end_at IS NULL OR p.source_end_at < now() - $2::bigint * interval '1 microsecond')
	ORDER BY p.mirror, p.topic, p.partition`

// StaleEnd is a partition leased by another instance whose stored source
// end has not changed for a while, with that end (-1 unknown).
type StaleEnd struct {
	ID        PartitionID
	SourceEnd int64
}

// PartitionsListStaleForeignEnds returns the partitions leased by an
// instance other than owner whose source end has not changed for
// staleAfter, in primary-key order. Their owner may be dead with its lease
// not yet expired, and nobody else would refresh their lag.
//
// An instance that holds every partition reads no partition row.
func PartitionsListStaleForeignEnds(ctx context.Context, q DBTX, owner string, staleAfter time.Duration) ([]StaleEnd, error) {
	rows, err := q.Query(ctx, staleForeignEndsSQL, owner, staleAfter.Microseconds())
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []StaleEnd
	for rows.Next() {
		var s StaleEnd
		if err := rows.Scan(&s.ID.Mirror, &s.ID.Topic, &s.ID.Partition, &s.SourceEnd); err != nil {
			return nil, interpret(err)
		}
		out = append(out, s)
	}
	return out, interpret(rows.Err())
}

// PartitionsSetForeignEnds stores source ends that instance owner listed
// for partitions another instance leases, in one statement. A row is
// written only if its stored end is lower and has not changed for
// staleAfter: a live owner of a busy partition refreshes it itself more
// often than that, and writes nothing twice. Rows another transaction
// holds are skipped, never waited for (as PartitionsSetEnds). It returns
// how many rows it wrote.
func PartitionsSetForeignEnds(ctx context.Context, q DBTX, owner string, staleAfter time.Duration, ends []StaleEnd) (int64, error) {
	n := len(ends)
	mirrors, topics := make([]string, n), make([]string, n)
	parts := make([]int32, n)
	src := make([]int64, n)
	for i, e := range ends {
		mirrors[i], topics[i], parts[i], src[i] = e.ID.Mirror, e.ID.Topic, e.ID.Partition, e.SourceEnd
	}
	tag, err := q.Exec(ctx, `
		WITH v AS (
			SELECT * FROM unnest($2::text[], $3::text[], $4::int[], $5::bigint[])
				AS v(mirror, topic, partition, src_end)
		), locked AS (
			SELECT p.mirror, p.topic, p.partition, v.src_end
			FROM v JOIN mirror_partitions p ON p.mirror = v.mirror AND p.topic = v.topic AND p.partition = v.partition
			WHERE p.lease_owner <> $1
			  AND v.src_end >= 0 AND (p.source_end_offset IS NULL OR p.source_end_offset < v.src_end)
			  AND (p.source_end_at IS NULL OR p.source_end_at < now() - $6::bigint * interval '1 microsecond')
			ORDER BY p.mirror, p.topic, p.partition
			FOR UPDATE OF p SKIP LOCKED
		)
		UPDATE mirror_partitions p SET source_end_offset = l.src_end, source_end_at = now()
		FROM locked l
		WHERE p.mirror = l.mirror AND p.topic = l.topic AND p.partition = l.partition`,
		owner, mirrors, topics, parts, src, staleAfter.Microseconds())
	if err != nil {
		return 0, interpret(err)
	}
	return tag.RowsAffected(), nil
}

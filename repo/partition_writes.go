package repo

import (
	"context"
	"kmirror/internal/vocabulary/states"
	"time"
)

// PartitionsSetStateParams is a fenced state write by a lease holder.
type PartitionsSetStateParams struct {
	Mirror    string
	Topic     string
	Partition int32
	Owner     string
	Epoch     int64
	// From must equal the stored state ("" is UNKNOWN) or nothing is written.
	From states.Partition
	To   states.Partition
	// Error, Retryable, RetryAttempt and NextRetryAt are stored as given.
	Error        string
	Retryable    bool
	RetryAttempt int
	NextRetryAt  *time.Time
	// SrcNext and DstNext, when both non-nil, replace the checkpoint.
	SrcNext, DstNext *int64
	// SourceEnd and DestinationEnd, each when non-nil, replace the end
	// offsets describe shows, as a checkpoint save's do: a change made
	// after alignment stores the ends its checkpoint was found against, so
	// that describe never pairs the new checkpoint with ends from before.
	SourceEnd, DestinationEnd *int64
	// LostRecordsAdd is added to lost_records.
	LostRecordsAdd int64
}

// PartitionsSetError records (or, with "", clears) an error that a
// partition keeps retrying through without leaving its state, fenced by
// owner, epoch and state; a moved-on lease writes nothing. Only a change is
// written.
func PartitionsSetError(ctx context.Context, q DBTX, f LeaseFence, state states.Partition, msg string) error {
	return PartitionsSetErrorEnd(ctx, q, f, state, msg, -1)
}

// PartitionsSetErrorEnd is PartitionsSetError that also records the
// destination's end offset as the worker found it (-1: unchanged): a
// destination that lost its records does not keep the end the checkpoint
// last saw in describe while the partition re-aligns.
func PartitionsSetErrorEnd(ctx context.Context, q DBTX, f LeaseFence, state states.Partition, msg string, dstEnd int64) error {
	_, err := q.Exec(ctx, `UPDATE mirror_partitions SET error = nullif($7, ''), updated_at = now(),
		destination_end_offset = CASE WHEN $8::bigint >= 0 THEN $8::bigint ELSE destination_end_offset END
		WHERE mirror = $1 AND topic = $2 AND partition = $3
		  AND lease_owner = $4 AND lease_epoch = $5 AND coalesce(state, '') = $6
		  AND (error IS DISTINCT FROM nullif($7, '') OR $8::bigint >= 0)`, append(f.args(state, msg), dstEnd)...)
	return interpret(err)
}

// lockOwned locks, in primary-key order, the rows of CTE v (mirror, topic,
// partition, epoch) that owner $1 still holds at that epoch, and returns
// v's rows for them. Every bulk write to mirror_partitions locks this way,
// so two of them can never wait on each other in a cycle (SQLSTATE 40P01).
// The update joins only this result: the planner guesses 10 rows for an
// unnest, and joined to v as well, it compares every row with every other,
// which is quadratic in the rows saved.
const lockOwned = `SELECT v.*
	FROM mirror_partitions p
	JOIN v ON p.mirror = v.mirror AND p.topic = v.topic AND p.partition = v.partition
	WHERE p.lease_owner = $1 AND p.lease_epoch = v.epoch
	ORDER BY p.mirror, p.topic, p.partition
	FOR UPDATE OF p`

// Checkpoint is one partition's progress, saved by its lease holder.
type Checkpoint struct {
	Mirror    string
	Topic     string
	Partition int32
	Epoch     int64
	SrcNext   int64
	DstNext   int64
	// SourceEnd and DestinationEnd are the latest known end offsets (-1 unknown).
	SourceEnd      int64
	DestinationEnd int64
	// Runs are offset-map runs to insert or extend (keyed by SrcStart). The
	// map grows at its end, so the one that starts last ends the map: its
	// last record is the row's last mirrored one.
	Runs []OffsetRun
	// ResetRetries clears retry_attempt: mirroring has made progress again.
	ResetRetries bool
	// ThrottledMs is how long the partition's copies have waited for the
	// mirror's replication throttle in all, since the partition was added.
	ThrottledMs int64
	// HandBack marks the last checkpoint of a clean hand-back: every copy
	// was answered, and the destination ends at DstNext as far as this
	// mirror wrote it (handed_back_dst). Any other save clears the mark.
	HandBack bool
	// Oldest, when set with Src = SrcNext, is the oldest record not yet
	// copied, as the mirroring session knows it from the batches it has
	// fetched; stored with the checkpoint.
	Oldest *OldestUncopied
}

// CheckpointsSave stores the checkpoints of one owner in one statement,
// fenced by owner and each partition's epoch, then upserts the offset-map
// runs of the partitions it could write. It returns the keys it saved; a
// missing key means that lease is gone.
func CheckpointsSave(ctx context.Context, q DBTX, owner string, cps []Checkpoint) (map[PartitionID]bool, error) {
	n := len(cps)
	mirrors, topics := make([]string, n), make([]string, n)
	parts := make([]int32, n)
	epochs, src, dst, srcEnd, dstEnd := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	lastSrc, lastDst, throttled := make([]int64, n), make([]int64, n), make([]int64, n)
	reset, handBack := make([]bool, n), make([]bool, n)
	oldSrc, oldAt := make([]int64, n), make([]*time.Time, n)
	for i, c := range cps {
		oldSrc[i] = -1
		if o := c.Oldest; o != nil && o.Src == c.SrcNext {
			oldSrc[i], oldAt[i] = o.Src, o.At
		}
		mirrors[i], topics[i], parts[i], epochs[i] = c.Mirror, c.Topic, c.Partition, c.Epoch
		src[i], dst[i], srcEnd[i], dstEnd[i] = c.SrcNext, c.DstNext, c.SourceEnd, c.DestinationEnd
		reset[i], throttled[i], handBack[i] = c.ResetRetries, c.ThrottledMs, c.HandBack
		lastSrc[i], lastDst[i] = -1, -1
		for _, r := range c.Runs {
			if end := r.SrcStart + r.Count - 1; end > lastSrc[i] {
				lastSrc[i], lastDst[i] = end, r.DstStart+r.Count-1
			}
		}
	}
	rows, err := q.Query(ctx, `
		WITH v AS (
			SELECT * FROM unnest($2::text[], $3::text[], $4::int[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bool[],
				$11::bigint[], $12::bigint[], $13::bigint[], $14::bool[], $15::bigint[], $16::timestamptz[])
				AS v(mirror, topic, partition, epoch, src_next, dst_next, src_end, dst_end, reset, last_src, last_dst, throttled_ms, hand_back,
					old_src, old_at)
		), locked AS (`+lockOwned+`)
		UPDATE mirror_partitions p SET
			-- A slower save of an older checkpoint must not move it back.
			src_next = CASE WHEN p.dst_next IS NULL OR v.dst_next >= p.dst_next THEN v.src_next ELSE p.src_next END,
			dst_next = CASE WHEN p.dst_next IS NULL OR v.dst_next >= p.dst_next THEN v.dst_next ELSE p.dst_next END,
			last_mirrored_src = CASE WHEN v.last_src >= 0 AND (p.dst_next IS NULL OR v.dst_next >= p.dst_next)
				THEN v.last_src ELSE p.last_mirrored_src END,
			last_mirrored_dst = CASE WHEN v.last_src >= 0 AND (p.dst_next IS NULL OR v.dst_next >= p.dst_next)
				THEN v.last_dst ELSE p.last_mirrored_dst END,
			progressed_at = CASE WHEN p.src_next IS NULL OR v.src_next > p.src_next THEN now() ELSE p.progressed_at END,
			source_end_offset = CASE WHEN v.src_end < 0 THEN p.source_end_offset ELSE v.src_end END,
			-- Other instances take over refreshing an end that stops changing
			-- while the source moves on (PartitionsSetForeignEnds).
			source_end_at = CASE WHEN v.src_end >= 0 AND p.source_end_offset IS DISTINCT FROM v.src_end
				THEN now() ELSE p.source_end_at END,
			destination_end_offset = CASE WHEN v.dst_end < 0 THEN p.destination_end_offset ELSE v.dst_end END,
			retry_attempt = CASE WHEN v.reset THEN 0 ELSE p.retry_attempt END,
			-- A running total, so an older checkpoint's is never the larger.
			throttled_ms = greatest(p.throttled_ms, v.throttled_ms),
			handed_back_dst = CASE WHEN v.hand_back THEN v.dst_next END,
			oldest_uncopied_src = CASE WHEN v.old_src >= 0 AND (p.dst_next IS NULL OR v.dst_next >= p.dst_next)
				THEN v.old_src ELSE p.oldest_uncopied_src END,
			oldest_uncopied_at = CASE WHEN v.old_src >= 0 AND (p.dst_next IS NULL OR v.dst_next >= p.dst_next)
				THEN v.old_at ELSE p.oldest_uncopied_at END,
			updated_at = now()
		FROM locked v
		WHERE p.mirror = v.mirror AND p.topic = v.topic AND p.partition = v.partition
		RETURNING p.mirror, p.topic, p.partition`,
		owner, mirrors, topics, parts, epochs, src, dst, srcEnd, dstEnd, reset, lastSrc, lastDst, throttled, handBack, oldSrc, oldAt)
	if err != nil {
		return nil, interpret(err)
	}
	saved := map[PartitionID]bool{}
	for rows.Next() {
		var id PartitionID
		if err := rows.Scan(&id.Mirror, &id.Topic, &id.Partition); err != nil {
			rows.Close()
			return nil, interpret(err)
		}
		saved[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, interpret(err)
	}
	var rm, rt []string
	var rp []int32
	var rs, rd, rc []int64
	for _, c := range cps {
		if !saved[PartitionID{c.Mirror, c.Topic, c.Partition}] {
			continue
		}
		for _, r := range c.Runs {
			rm, rt, rp = append(rm, c.Mirror), append(rt, c.Topic), append(rp, c.Partition)
			rs, rd, rc = append(rs, r.SrcStart), append(rd, r.DstStart), append(rc, r.Count)
		}
	}
	if len(rm) > 0 {
		_, err = q.Exec(ctx, `
			INSERT INTO offset_map_runs (mirror, topic, partition, src_start, dst_start, count)
			SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[])
			ON CONFLICT (mirror, topic, partition, src_start)
			DO UPDATE SET dst_start = excluded.dst_start, count = excluded.count`, rm, rt, rp, rs, rd, rc)
		if err != nil {
			return nil, interpret(err)
		}
	}
	return saved, nil
}

// PartitionID names a mirror partition.
type PartitionID struct {
	Mirror    string
	Topic     string
	Partition int32
}

// OffsetRunsTruncate deletes the offset-map runs that map to destination
// offsets at or after dstFrom, and shortens a run that straddles it: the
// destination lost those records, so the map must not claim them.
// It writes nothing unless the fence still holds.
func OffsetRunsTruncate(ctx context.Context, q DBTX, f LeaseFence, dstFrom int64) error {
	_, err := q.Exec(ctx, `
		WITH del AS (
			DELETE FROM offset_map_runs
			WHERE mirror = $1 AND topic = $2 AND partition = $3 AND dst_start >= $6 AND `+fenced+`)
		UPDATE offset_map_runs SET count = $6 - dst_start
		WHERE mirror = $1 AND topic = $2 AND partition = $3
		  AND dst_start < $6 AND dst_start + count > $6 AND `+fenced, f.args(dstFrom)...)
	return interpret(err)
}

// OffsetRunByDestination returns the run holding destination offset dst, or
// ErrNotFound.
func OffsetRunByDestination(ctx context.Context, q DBTX, mirror, topic string, partition int32, dst int64) (OffsetRun, error) {
	var r OffsetRun
	err := q.QueryRow(ctx, `SELECT src_start, dst_start, count FROM offset_map_runs
		WHERE mirror = $1 AND topic = $2 AND partition = $3 AND dst_start <= $4 AND dst_start + count > $4
		ORDER BY dst_start DESC LIMIT 1`, mirror, topic, partition, dst).Scan(&r.SrcStart, &r.DstStart, &r.Count)
	return r, interpret(err)
}

// OffsetRunsFirst returns the earliest run of a partition, or ErrNotFound.
func OffsetRunsFirst(ctx context.Context, q DBTX, mirror, topic string, partition int32) (OffsetRun, error) {
	var r OffsetRun
	err := q.QueryRow(ctx, `SELECT src_start, dst_start, count FROM offset_map_runs
		WHERE mirror = $1 AND topic = $2 AND partition = $3 ORDER BY src_start LIMIT 1`,
		mirror, topic, partition).Scan(&r.SrcStart, &r.DstStart, &r.Count)
	return r, interpret(err)
}

// OffsetRunsDelete removes every run of the fence's partition (its
// destination lost everything), unless the fence no longer holds.
func OffsetRunsDelete(ctx context.Context, q DBTX, f LeaseFence) error {
	_, err := q.Exec(ctx, `DELETE FROM offset_map_runs
		WHERE mirror = $1 AND topic = $2 AND partition = $3 AND `+fenced, f.args()...)
	return interpret(err)
}

// PartitionsSetDivergentTail records the divergent tail a failback kept
// (nil clears it), fenced by owner and epoch; ErrNotFound when the lease is
// gone.
func PartitionsSetDivergentTail(ctx context.Context, q DBTX, f LeaseFence, t *DivergentTail) error {
	var start, end, records *int64
	if t != nil {
		start, end, records = &t.Start, &t.End, &t.Records
	}
	tag, err := q.Exec(ctx, `UPDATE mirror_partitions SET divergent_tail_start = $6, divergent_tail_end = $7,
		divergent_tail_records = $8, updated_at = now()
		WHERE mirror = $1 AND topic = $2 AND partition = $3 AND `+fenced, f.args(start, end, records)...)
	if err != nil {
		return interpret(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// EndOffsets are a partition's latest end offsets (-1 unknown), for lag.
type EndOffsets struct {
	ID             PartitionID
	Epoch          int64
	SourceEnd      int64
	DestinationEnd int64
	// Oldest, when set, is the partition's oldest uncopied record as read
	// for the checkpoint's src_next: written only while src_next is still
	// Oldest.Src.
	Oldest *OldestUncopied
}

// OldestUncopied is the timestamp of the first committed data record at or
// after source offset Src (the checkpoint's src_next when it was read), or
// a nil At when none lay between Src and the source end: lag in time
// (LagMsSQL).
type OldestUncopied struct {
	Src int64
	At  *time.Time
}

// PartitionsSetEnds stores end offsets for the owner's partitions in one
// statement, fenced by owner and epoch; the checkpoint is not touched. It
// returns the partitions whose stored ends now match the given ones.
func PartitionsSetEnds(ctx context.Context, q DBTX, owner string, ends []EndOffsets) (map[PartitionID]bool, error) {
	next, err := PartitionsSetEndsNext(ctx, q, owner, ends)
	if err != nil {
		return nil, err
	}
	stored := make(map[PartitionID]bool, len(next))
	for id := range next {
		stored[id] = true
	}
	return stored, nil
}

// PartitionsSetEndsNext is PartitionsSetEnds that also returns, for each
// partition stored, its checkpoint's src_next (-1 when it has none): what
// the oldest uncopied record is read for.
//
// Only rows whose end offsets (or oldest uncopied record) change are locked
// and written: an idle partition costs no row update. A row another
// transaction holds (a state change, a checkpoint) is skipped, not waited
// for: end offsets only show lag, the caller sends them again next time,
// and a refresh that waited for thousands of busy rows would hold a
// connection while a large topic is being added.
func PartitionsSetEndsNext(ctx context.Context, q DBTX, owner string, ends []EndOffsets) (map[PartitionID]int64, error) {
	n := len(ends)
	mirrors, topics := make([]string, n), make([]string, n)
	parts := make([]int32, n)
	epochs, src, dst, oldSrc := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	oldAt := make([]*time.Time, n)
	for i, e := range ends {
		mirrors[i], topics[i], parts[i] = e.ID.Mirror, e.ID.Topic, e.ID.Partition
		epochs[i], src[i], dst[i], oldSrc[i] = e.Epoch, e.SourceEnd, e.DestinationEnd, -1
		if o := e.Oldest; o != nil {
			oldSrc[i], oldAt[i] = o.Src, o.At
		}
	}
	rows, err := q.Query(ctx, `
		WITH v AS (
			SELECT * FROM unnest($2::text[], $3::text[], $4::int[], $5::bigint[], $6::bigint[], $7::bigint[],
				$8::bigint[], $9::timestamptz[])
				AS v(mirror, topic, partition, epoch, src_end, dst_end, old_src, old_at)
		), held AS (
			SELECT v.*, coalesce(p.src_next, -1) AS src_next,
				(v.src_end >= 0 AND p.source_end_offset IS DISTINCT FROM v.src_end)
				OR (v.dst_end >= 0 AND p.destination_end_offset IS DISTINCT FROM v.dst_end)
				OR (v.old_src >= 0 AND v.old_src = p.src_next AND (p.oldest_uncopied_src IS DISTINCT FROM v.old_src
					OR p.oldest_uncopied_at IS DISTINCT FROM v.old_at)) AS changes
			FROM v JOIN mirror_partitions p ON p.mirror = v.mirror AND p.topic = v.topic AND p.partition = v.partition
			WHERE p.lease_owner = $1 AND p.lease_epoch = v.epoch
		), locked AS (
			-- The new values travel with the locked keys, so that the
			-- update joins only them, by primary key. Joining held as well
			-- let the planner (which expects one row from each) compare
			-- every locked row with every held one: 15 s for 6,600 rows.
			SELECT h.mirror, h.topic, h.partition, h.src_end, h.dst_end, h.old_src, h.old_at
			FROM held h
			JOIN mirror_partitions p ON p.mirror = h.mirror AND p.topic = h.topic AND p.partition = h.partition
			WHERE h.changes AND p.lease_owner = $1 AND p.lease_epoch = h.epoch
			ORDER BY p.mirror, p.topic, p.partition
			FOR UPDATE OF p SKIP LOCKED
		), written AS (
			UPDATE mirror_partitions p SET
				source_end_offset = CASE WHEN l.src_end < 0 THEN p.source_end_offset ELSE l.src_end END,
				source_end_at = CASE WHEN l.src_end >= 0 AND p.source_end_offset IS DISTINCT FROM l.src_end
					THEN now() ELSE p.source_end_at END,
				destination_end_offset = CASE WHEN l.dst_end < 0 THEN p.destination_end_offset ELSE l.dst_end END,
				-- Read for a checkpoint that has moved on since, it would
				-- overstate the age: not written.
				oldest_uncopied_src = CASE WHEN l.old_src >= 0 AND l.old_src = p.src_next
					THEN l.old_src ELSE p.oldest_uncopied_src END,
				oldest_uncopied_at = CASE WHEN l.old_src >= 0 AND l.old_src = p.src_next
					THEN l.old_at ELSE p.oldest_uncopied_at END
			FROM locked l
			WHERE p.mirror = l.mirror AND p.topic = l.topic AND p.partition = l.partition
			RETURNING p.mirror, p.topic, p.partition, coalesce(p.src_next, -1) AS src_next
		)
		SELECT mirror, topic, partition, src_next FROM written
		UNION ALL
		SELECT mirror, topic, partition, src_next FROM held WHERE NOT changes`,
		owner, mirrors, topics, parts, epochs, src, dst, oldSrc, oldAt)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	stored := map[PartitionID]int64{}
	for rows.Next() {
		var id PartitionID
		var next int64
		if err := rows.Scan(&id.Mirror, &id.Topic, &id.Partition, &next); err != nil {
			return nil, interpret(err)
		}
		stored[id] = next
	}
	return stored, interpret(rows.Err())
}

// PartitionsRestoreParams is a partition's state and checkpoint as read back
// from __mirror_state.
type PartitionsRestoreParams struct {
	Mirror    string
	Topic     string
	Partition int32
	// State, PreviousState and Error: "" is stored as NULL.
	State         states.Partition
	PreviousState states.Partition
	Error         string
	SrcNext       *int64
	DstNext       *int64
	LostRecords   int64
	// LastMirroredSrc and LastMirroredDst, both set or both nil, are the
	// last mirrored offsets.
	LastMirroredSrc, LastMirroredDst *int64
}

// PartitionsRestore overwrites a partition's state and checkpoint. Unlike
// every other partition write it is not fenced by a lease: restore fills an
// empty database, where leases start free. It returns the rows updated, 0
// when the partition does not exist.
func PartitionsRestore(ctx context.Context, q DBTX, p PartitionsRestoreParams) (int64, error) {
	tag, err := q.Exec(ctx, `UPDATE mirror_partitions SET state = nullif($4, ''),
			previous_state = nullif($5, ''), error = nullif($6, ''), src_next = $7, dst_next = $8,
			lost_records = $9, last_mirrored_src = $10, last_mirrored_dst = $11,
			state_changed_at = now(), updated_at = now()
		WHERE mirror = $1 AND topic = $2 AND partition = $3`,
		p.Mirror, p.Topic, p.Partition, p.State, p.PreviousState, p.Error, p.SrcNext, p.DstNext, p.LostRecords,
		p.LastMirroredSrc, p.LastMirroredDst)
	if err != nil {
		return 0, interpret(err)
	}
	return tag.RowsAffected(), nil
}

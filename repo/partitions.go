package repo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"kmirror/internal/vocabulary/states"
)

// Partition is one row of mirror_partitions: a unit of replication.
type Partition struct {
	Mirror               string
	Topic                string
	Partition            int32
	State                states.Partition // "" is UNKNOWN
	PreviousState        states.Partition
	Error                string
	Retryable            bool
	RetryAttempt         int
	NextRetryAt          *time.Time
	LeaseOwner           string
	LeaseEpoch           int64
	SrcNext              *int64
	DstNext              *int64
	SourceEndOffset      *int64
	DestinationEndOffset *int64
	LostRecords          int64
	StateChangedAt       *time.Time
	UpdatedAt            time.Time
	// ProgressedAt is when the checkpoint last moved forward.
	ProgressedAt *time.Time
	// LastMirroredSrc and LastMirroredDst are the source and destination
	// offsets of the last record copied (the end of the offset map, as of
	// the row's last state change or checkpoint save); nil before any.
	LastMirroredSrc, LastMirroredDst *int64
	// DivergentTail is the tail a failback with keep_divergent continued
	// after; nil when none was kept.
	DivergentTail *DivergentTail
	// ThrottledMs is how long the partition's copies have waited for the
	// mirror's replication throttle in all, since it was added.
	ThrottledMs int64
	// HandedBackDst is the destination offset at which the previous owner
	// handed the partition back cleanly (every copy answered, the
	// checkpoint saved at it); -1 when it was not.
	HandedBackDst int64
	// AlignedEpoch is the lease epoch under which the partition was last
	// aligned: under a newer one, its owner is re-aligning it (Realigning).
	AlignedEpoch int64
	// LagMs is the age, by the database's clock when read, of the oldest
	// source record not yet on the destination: 0 when caught up, nil when
	// unknown (LagMsSQL).
	LagMs *int64
	// LeaseLive and OwnerRenewedAt are set by PartitionsList only: whether
	// the owner's session still holds the lease, and when the owner last
	// renewed its session.
	LeaseLive      bool
	OwnerRenewedAt *time.Time
}

const partitionColumns = `mirror, topic, partition, coalesce(state, ''), coalesce(previous_state, ''),
	coalesce(error, ''), retryable, retry_attempt, next_retry_at, coalesce(lease_owner, ''),
	lease_epoch, src_next, dst_next, source_end_offset,
	destination_end_offset, lost_records, state_changed_at, updated_at, progressed_at,
	last_mirrored_src, last_mirrored_dst, divergent_tail_start, divergent_tail_end, divergent_tail_records,
	throttled_ms, coalesce(handed_back_dst, -1), coalesce(aligned_epoch, 0), ` + LagMsSQL

// LagMsSQL is a partition row's lag in time, in milliseconds (design.md,
// "Lag"): the age of the oldest source record not yet on the destination.
// It is 0 when the checkpoint has reached the source end, and nil when the
// end is unknown, when the stored timestamp was read for another offset
// than src_next (the checkpoint moved since: the timestamp would overstate
// the age), and for a STOPPED partition: its topic was removed (failed
// over), and what it did not copy is counted once, by the preview, not
// as an age that would keep an RPO alert firing for ever. A NULL timestamp read for src_next means no data record lay
// between it and the end (markers, aborted records): nothing to lose. The
// age comes from the database's clock when read, so a row that nobody
// writes (paused, failed, its owner or source gone) keeps ageing.
const LagMsSQL = `CASE
		WHEN state = 'STOPPED' OR source_end_offset IS NULL OR src_next IS NULL THEN NULL
		WHEN source_end_offset <= src_next THEN 0
		WHEN oldest_uncopied_src IS DISTINCT FROM src_next THEN NULL
		WHEN oldest_uncopied_at IS NULL THEN 0
		ELSE greatest(0, floor(extract(epoch FROM now() - oldest_uncopied_at) * 1000))::bigint
	END`

// DivergentTail is a range of destination offsets holding records that the
// source never had: written to the destination after the mirror that
// copied the other way last read it.
type DivergentTail struct {
	Start, End int64 // destination offsets [Start, End)
	Records    int64 // the records in it (markers and aborted ones not counted)
}

// scanPartition scans the partitionColumns, then extra.
func scanPartition(row scanner, extra ...any) (Partition, error) {
	return newPartitionScan(extra...).scan(row)
}

// partitionScan scans the rows of a partitionColumns query into one set of
// targets made once per query, not once per row: a slice of targets and
// the tail's pointers per row would be a large part of a big describe's
// time.
type partitionScan struct {
	p       Partition
	tail    [3]*int64 // the divergent tail's start, end and records
	targets []any
}

// newPartitionScan scans the partitionColumns, then extra. A pointer
// target among extra must be set to nil before each scan, as scan does
// its own, so that a non-NULL value is written to a new variable rather
// than into the previous row's.
func newPartitionScan(extra ...any) *partitionScan {
	s := &partitionScan{}
	p := &s.p
	s.targets = append([]any{&p.Mirror, &p.Topic, &p.Partition, &p.State, &p.PreviousState, &p.Error,
		&p.Retryable, &p.RetryAttempt, &p.NextRetryAt, &p.LeaseOwner, &p.LeaseEpoch,
		&p.SrcNext, &p.DstNext, &p.SourceEndOffset,
		&p.DestinationEndOffset, &p.LostRecords, &p.StateChangedAt, &p.UpdatedAt, &p.ProgressedAt,
		&p.LastMirroredSrc, &p.LastMirroredDst, &s.tail[0], &s.tail[1], &s.tail[2],
		&p.ThrottledMs, &p.HandedBackDst, &p.AlignedEpoch, &p.LagMs}, extra...)
	return s
}

// scan reads one row. The Partition returned is the caller's: scan clears
// its targets first, so the row's pointers are new ones.
func (s *partitionScan) scan(row scanner) (Partition, error) {
	s.p, s.tail = Partition{}, [3]*int64{}
	err := row.Scan(s.targets...)
	p := s.p
	if t := s.tail; t[0] != nil && t[1] != nil && t[2] != nil {
		p.DivergentTail = &DivergentTail{Start: *t[0], End: *t[1], Records: *t[2]}
	}
	return p, interpret(err)
}

// Realigning says whether the partition's new owner is re-aligning it
// after taking it over: it keeps the state it was left in (MIRRORING,
// PAUSING, STOPPING) until alignment has found where to resume.
func (p Partition) Realigning() bool {
	switch p.State {
	case states.Mirroring, states.Pausing, states.Stopping:
		return p.LeaseOwner != "" && p.AlignedEpoch != p.LeaseEpoch
	}
	return false
}

// PartitionKey is a mirror partition's primary key.
type PartitionKey struct {
	Mirror    string
	Topic     string
	Partition int32
}

// PartitionsListParams filters PartitionsList; empty fields match all.
type PartitionsListParams struct {
	Mirror string
	// Topics, when non-nil, limits the rows to these topics.
	Topics []string
	// State filters by actual state; "UNKNOWN" selects rows with no state.
	State string
	// Erroring keeps only rows with a non-empty error (as MirrorsStatus
	// counts them).
	Erroring bool
	// DivergentTail keeps only rows that kept a divergent tail.
	DivergentTail bool
	// After, when set, starts the list after this key: keyset pagination
	// over the primary key, so a page costs the same wherever it starts.
	After *PartitionKey
	// Limit, when positive, caps how many rows are returned.
	Limit int
}

// PartitionsList returns partitions ordered by mirror, topic and partition
// (the primary key's order).
func PartitionsList(ctx context.Context, q DBTX, p PartitionsListParams) ([]Partition, error) {
	// Only the filters in use become predicates. One statement with
	// "($1 = '' OR mirror = $1)" for every filter would do, but its generic
	// plan (which pgx's prepared statements may get) can use none of them
	// in the index condition and filters every row from the start of the
	// table instead.
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if p.Mirror != "" {
		where = append(where, "p.mirror = "+arg(p.Mirror))
	}
	if p.Topics != nil {
		where = append(where, "p.topic = ANY("+arg(p.Topics)+")")
	}
	switch p.State {
	case "":
	case "UNKNOWN":
		where = append(where, "p.state IS NULL")
	default:
		where = append(where, "p.state = "+arg(p.State))
	}
	if p.Erroring {
		where = append(where, "coalesce(p.error, '') <> ''")
	}
	if p.DivergentTail {
		where = append(where, "p.divergent_tail_start IS NOT NULL")
	}
	if a := p.After; a != nil {
		// A row comparison in the primary key's column order: the index
		// scan starts right after the key.
		where = append(where, fmt.Sprintf("(p.mirror, p.topic, p.partition) > (%s, %s, %s)",
			arg(a.Mirror), arg(a.Topic), arg(a.Partition)))
	}
	sql := `SELECT ` + partitionColumns + `,
			i.id IS NOT NULL AND i.session_epoch = p.lease_session AND i.session_expires_at > now(),
			i.session_renewed_at
		FROM mirror_partitions p
		LEFT JOIN instances i ON i.id = p.lease_owner`
	if len(where) > 0 {
		sql += "\n\t\tWHERE " + strings.Join(where, " AND ")
	}
	sql += "\n\t\tORDER BY p.mirror, p.topic, p.partition"
	if p.Limit > 0 {
		sql += " LIMIT " + arg(p.Limit)
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []Partition
	var live *bool
	var renewed *time.Time
	scan := newPartitionScan(&live, &renewed)
	for rows.Next() {
		live, renewed = nil, nil
		pt, err := scan.scan(rows)
		if err != nil {
			return nil, err
		}
		pt.OwnerRenewedAt = renewed
		pt.LeaseLive = live != nil && *live
		out = append(out, pt)
	}
	return out, interpret(rows.Err())
}

// PartitionsGet returns one partition, or ErrNotFound.
func PartitionsGet(ctx context.Context, q DBTX, mirror, topic string, partition int32) (Partition, error) {
	return scanPartition(q.QueryRow(ctx, `SELECT `+partitionColumns+` FROM mirror_partitions
		WHERE mirror = $1 AND topic = $2 AND partition = $3`, mirror, topic, partition))
}

// PartitionsChangedSince returns partitions whose row changed after t.
func PartitionsChangedSince(ctx context.Context, q DBTX, t time.Time) ([]Partition, error) {
	return collectPartitions(q.Query(ctx, `SELECT `+partitionColumns+` FROM mirror_partitions WHERE updated_at > $1
		ORDER BY mirror, topic, partition`, t))
}

// PartitionsGetMany returns the named partitions that exist, in primary-key
// order, in one statement.
func PartitionsGetMany(ctx context.Context, q DBTX, ids []PartitionID) ([]Partition, error) {
	mirrors, topics, parts := make([]string, len(ids)), make([]string, len(ids)), make([]int32, len(ids))
	for i, id := range ids {
		mirrors[i], topics[i], parts[i] = id.Mirror, id.Topic, id.Partition
	}
	return collectPartitions(q.Query(ctx, `SELECT `+partitionColumns+` FROM mirror_partitions
		WHERE (mirror, topic, partition) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::int[]))
		ORDER BY mirror, topic, partition`, mirrors, topics, parts))
}

// collectPartitions scans every row of a partitionColumns query.
func collectPartitions(rows pgx.Rows, err error) ([]Partition, error) {
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []Partition
	scan := newPartitionScan()
	for rows.Next() {
		p, err := scan.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, interpret(rows.Err())
}

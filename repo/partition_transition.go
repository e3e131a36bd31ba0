package repo

import (
	"context"
	"time"
)

// partitionRecordJSON builds, in SQL, the __mirror_state record of the
// partition row a state change stored: service.PartitionRecord's fields,
// which restore decodes (absent and null decode alike).
// service's TestTransitionRecordMatchesGo keeps the two the same.
const partitionRecordJSON = `jsonb_build_object('version', $19::int, 'mirror', mirror, 'topic', topic,
	'partition', partition, 'state', coalesce(state, ''), 'previous_state', previous_state,
	'error', error, 'src_next', src_next, 'dst_next', dst_next, 'lost_records', lost_records,
	'last_mirrored_src', last_mirrored_src, 'last_mirrored_dst', last_mirrored_dst,
	'updated_at', updated_at)`

// lastMirroredNote is what a state change that asks for it
// (PartitionStateWrite.EventLastMirrored) adds to its event, from the row
// it stored: to the message, and to the data as last_mirrored (null when
// nothing was copied).
const lastMirroredNote = `CASE WHEN last_mirrored_src IS NULL THEN '; nothing was mirrored'
	ELSE format('; last mirrored source offset %s → destination offset %s', last_mirrored_src, last_mirrored_dst) END`
const lastMirroredData = `jsonb_build_object('last_mirrored', CASE WHEN last_mirrored_src IS NULL THEN NULL
	ELSE jsonb_build_object('source_offset', last_mirrored_src, 'destination_offset', last_mirrored_dst) END)`

// PartitionStateWrite is one fenced state change with its event (Kind,
// Message and Data are used; the partition is the row's) and the key of
// its __mirror_state outbox row.
type PartitionStateWrite struct {
	PartitionsSetStateParams
	Event     Event
	OutboxKey string
	// EventLastMirrored adds the stored last mirrored offsets to the
	// event's message and data.
	EventLastMirrored bool
	// Realign records a realignment instead of a state change: From and To
	// are the state kept, SrcNext and DstNext the checkpoint alignment
	// found. The previous state, the retry fields and the time of the last
	// state change are kept; the error is cleared, and the partition counts
	// as aligned under Epoch.
	Realign bool
}

// PartitionsTransition writes one state change (see PartitionsTransitions);
// ErrNotFound when the lease or the state moved on.
func PartitionsTransition(ctx context.Context, q DBTX, p PartitionsSetStateParams, e Event, outboxKey string, recordVersion int) (Partition, error) {
	rows, err := PartitionsTransitions(ctx, q, []PartitionStateWrite{{PartitionsSetStateParams: p, Event: e, OutboxKey: outboxKey}}, recordVersion)
	if err != nil {
		return Partition{}, err
	}
	if rows[0].Mirror == "" {
		return Partition{}, ErrNotFound
	}
	return rows[0], nil
}

// PartitionsTransitions writes state changes, each fenced by owner, epoch
// and its From state, with their events and __mirror_state outbox rows, in
// one statement: one round trip and one commit for all of them. A commit
// that NOTIFYs (the outbox does) is serialized with every other such
// commit, flush included, so partitions that start together and write
// their changes one by one queue behind each other.
//
// The result is aligned with ws: the stored row, or the zero Partition
// (Mirror "") where nothing was written because the lease or the state had
// moved on. Events and outbox rows are written in the order of ws. The
// outbox values are the stored rows' records at recordVersion.
//
// Each change also stores the last mirrored offsets, the end of the
// partition's offset map (one primary-key lookup): a state change comes
// after the session's last checkpoint, or after alignment cut or rebuilt
// the map, so the row then says what the destination holds.
func PartitionsTransitions(ctx context.Context, q DBTX, ws []PartitionStateWrite, recordVersion int) ([]Partition, error) {
	n := len(ws)
	var (
		mirrors, topics, owners, froms, tos, errs = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		kinds, messages, data, keys               = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		partitions, attempts                      = make([]int32, n), make([]int32, n)
		epochs, lostAdds                          = make([]int64, n), make([]int64, n)
		srcNexts, dstNexts                        = make([]*int64, n), make([]*int64, n)
		srcEnds, dstEnds                          = make([]*int64, n), make([]*int64, n)
		retryables, notes, realigns               = make([]bool, n), make([]bool, n), make([]bool, n)
		nextRetries                               = make([]*time.Time, n)
	)
	for i, w := range ws {
		p := w.PartitionsSetStateParams
		mirrors[i], topics[i], partitions[i], owners[i], epochs[i] = p.Mirror, p.Topic, p.Partition, p.Owner, p.Epoch
		froms[i], tos[i], errs[i], retryables[i] = string(p.From), string(p.To), p.Error, p.Retryable
		attempts[i], nextRetries[i], lostAdds[i] = int32(p.RetryAttempt), p.NextRetryAt, p.LostRecordsAdd
		if p.SrcNext != nil && p.DstNext != nil {
			srcNexts[i], dstNexts[i] = p.SrcNext, p.DstNext
		}
		srcEnds[i], dstEnds[i] = p.SourceEnd, p.DestinationEnd
		kinds[i], messages[i], data[i], keys[i] = w.Event.Kind, w.Event.Message, string(w.Event.Data), w.OutboxKey
		notes[i], realigns[i] = w.EventLastMirrored, w.Realign
	}
	rows, err := q.Query(ctx, `
		WITH w AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::bigint[], $6::text[],
				$7::text[], $8::text[], $9::bool[], $10::int[], $11::timestamptz[], $12::bigint[],
				$13::bigint[], $14::bigint[], $15::text[], $16::text[], $17::text[], $18::text[], $20::bool[], $21::bool[],
				$22::bigint[], $23::bigint[])
			WITH ORDINALITY AS w (mirror, topic, partition, owner, epoch, from_state, to_state, error,
				retryable, retry_attempt, next_retry_at, src_next, dst_next, lost_add,
				ev_kind, ev_message, ev_data, outbox_key, ev_note, realign, src_end, dst_end, ord)
		), upd AS (
			UPDATE mirror_partitions p SET
				previous_state = CASE WHEN w.realign THEN p.previous_state ELSE p.state END,
				state = w.to_state, error = nullif(w.error, ''),
				retryable = CASE WHEN w.realign THEN p.retryable ELSE w.retryable END,
				retry_attempt = CASE WHEN w.realign THEN p.retry_attempt ELSE w.retry_attempt END,
				next_retry_at = CASE WHEN w.realign THEN p.next_retry_at ELSE w.next_retry_at END,
				src_next = coalesce(w.src_next, p.src_next), dst_next = coalesce(w.dst_next, p.dst_next),
				lost_records = p.lost_records + w.lost_add,
				source_end_offset = coalesce(w.src_end, p.source_end_offset),
				source_end_at = CASE WHEN w.src_end IS NOT NULL AND p.source_end_offset IS DISTINCT FROM w.src_end
					THEN now() ELSE p.source_end_at END,
				destination_end_offset = coalesce(w.dst_end, p.destination_end_offset),
				last_mirrored_src = e.src, last_mirrored_dst = e.dst,
				-- MIRRORING is reached after alignment, under the epoch that
				-- aligned; any change ends a clean hand-back's mark.
				aligned_epoch = CASE WHEN w.realign OR w.to_state = 'MIRRORING' THEN w.epoch ELSE p.aligned_epoch END,
				handed_back_dst = NULL,
				state_changed_at = CASE WHEN w.realign THEN p.state_changed_at ELSE now() END, updated_at = now()
			FROM w LEFT JOIN LATERAL (
				SELECT r.src_start + r.count - 1 AS src, r.dst_start + r.count - 1 AS dst
				FROM offset_map_runs r
				WHERE r.mirror = w.mirror AND r.topic = w.topic AND r.partition = w.partition
				ORDER BY r.src_start DESC LIMIT 1) e ON true
			WHERE p.mirror = w.mirror AND p.topic = w.topic AND p.partition = w.partition
			  AND p.lease_owner = w.owner AND p.lease_epoch = w.epoch AND coalesce(p.state, '') = w.from_state
			RETURNING p.*, w.ord, w.ev_kind, w.ev_message, w.ev_data, w.ev_note, w.outbox_key
		), ev AS (
			-- The incarnation here rather than by the events trigger: one
			-- statement may write thousands of events.
			INSERT INTO events (kind, mirror, topic, partition, message, data, mirror_incarnation)
			SELECT ev_kind, mirror, topic, partition,
				CASE WHEN ev_note THEN ev_message || `+lastMirroredNote+` ELSE ev_message END,
				CASE WHEN ev_note THEN coalesce(nullif(ev_data, '')::jsonb, '{}') || `+lastMirroredData+`
					ELSE nullif(ev_data, '')::jsonb END,
				(SELECT m.incarnation FROM mirrors m WHERE m.name = upd.mirror)
			FROM upd ORDER BY ord
		), ob AS (
			INSERT INTO outbox (mirror, key, value)
			SELECT mirror, outbox_key, `+partitionRecordJSON+` FROM upd ORDER BY ord
		)
		SELECT ord, `+partitionColumns+` FROM upd`,
		mirrors, topics, partitions, owners, epochs, froms, tos, errs, retryables, attempts, nextRetries,
		srcNexts, dstNexts, lostAdds, kinds, messages, data, keys, recordVersion, notes, realigns, srcEnds, dstEnds)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	out := make([]Partition, n)
	for rows.Next() {
		var ord int64
		p, err := scanPartition(prefixed{rows, &ord})
		if err != nil {
			return nil, err
		}
		out[ord-1] = p
	}
	return out, interpret(rows.Err())
}

// prefixed scans one leading column into first, then the rest as the
// wrapped scanner would.
type prefixed struct {
	row   scanner
	first any
}

func (p prefixed) Scan(dest ...any) error { return p.row.Scan(append([]any{p.first}, dest...)...) }

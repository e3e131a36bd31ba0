package repo

import (
	"context"
)

// partitionRecordJSON builds, in SQL, the __mirror_state record of the
// partition row a state change stored: service.PartitionRecord's fields,
// which restore decodes (absent and null decode alike).
// service's TestTransitionRecordMatchesGo keeps the two the same.
const partitionRecordJSON = `jsonb_build_object('version', $19::int, 'mirror', mirror, 'topic', topic,
	'partition', partition, 'state', coalesce(state, ''), 'previous_state', previous_state,
	'error', error, 'src_next', src_next, 'dst_next', dst_next, 'lost_records', lost_records,
	'updated_at', updated_at)`

// PartitionsTransition writes a state change, fenced by owner, epoch and
// the From state, with its event and its __mirror_state outbox row, in one
// statement: one round trip instead of
// five (begin, update, event, outbox, commit). Every partition changes state
// at least twice on its way to MIRRORING, so at 10,000 partitions those
// round trips held the data pool's connections for most of the start.
// Nothing is written, and ErrNotFound returned, when the lease or the state
// moved on. The outbox value is the stored row's record at recordVersion.
func PartitionsTransition(ctx context.Context, q DBTX, p PartitionsSetStateParams, e Event, outboxKey string, recordVersion int) (Partition, error) {
	var data any
	if len(e.Data) > 0 {
		data = e.Data
	}
	return scanPartition(q.QueryRow(ctx, `
		WITH upd AS (
			UPDATE mirror_partitions SET
				previous_state = state, state = $7, error = nullif($8, ''), retryable = $9,
				retry_attempt = $10, next_retry_at = $11,
				src_next = CASE WHEN $12::bigint IS NULL THEN src_next ELSE $12 END,
				dst_next = CASE WHEN $13::bigint IS NULL THEN dst_next ELSE $13 END,
				lost_records = lost_records + $14,
				state_changed_at = now(), updated_at = now()
			WHERE mirror = $1 AND topic = $2 AND partition = $3
			  AND lease_owner = $4 AND lease_epoch = $5 AND coalesce(state, '') = $6
			RETURNING *
		), ev AS (
			INSERT INTO events (kind, mirror, topic, partition, message, data)
			SELECT $15, mirror, topic, partition, $16, $17 FROM upd
		), ob AS (
			INSERT INTO outbox (mirror, key, value)
			SELECT mirror, $18, `+partitionRecordJSON+` FROM upd
		)
		SELECT `+partitionColumns+` FROM upd`,
		p.Mirror, p.Topic, p.Partition, p.Owner, p.Epoch, p.From, p.To, p.Error, p.Retryable,
		p.RetryAttempt, p.NextRetryAt, p.SrcNext, p.DstNext, p.LostRecordsAdd,
		e.Kind, e.Message, data, outboxKey, recordVersion))
}

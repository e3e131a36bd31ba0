package repo

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"kmirror/internal/vocabulary/states"
)

// LeaseFence names the partition lease a worker writes under: a write that
// carries it changes nothing unless mirror_partitions still names this
// owner and epoch for that partition.
type LeaseFence struct {
	Mirror    string
	Topic     string
	Partition int32
	Owner     string
	Epoch     int64
}

// fenced is the SQL condition for a LeaseFence in $1..$5 (mirror, topic,
// partition, owner, epoch).
const fenced = `EXISTS (SELECT 1 FROM mirror_partitions f
	WHERE f.mirror = $1 AND f.topic = $2 AND f.partition = $3 AND f.lease_owner = $4 AND f.lease_epoch = $5)`

func (f LeaseFence) args(more ...any) []any {
	return append([]any{f.Mirror, f.Topic, f.Partition, f.Owner, f.Epoch}, more...)
}

// TopicDesire is a mirror topic's desire as the partition workers read it.
type TopicDesire struct {
	Mirror            string
	Topic             string
	DestTopic         string
	DesiredState      states.Desired
	ReplicationFactor int
	Recreate          bool
	ContinueHistory   bool
	KeepDivergent     bool
}

// TopicsListDesired reads every mirror topic's desired state, in one query.
func TopicsListDesired(ctx context.Context, q DBTX) ([]TopicDesire, error) {
	rows, err := q.Query(ctx, `SELECT mirror, topic, dest_topic, desired_state, replication_factor, recreate, continue_history, keep_divergent FROM mirror_topics`)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []TopicDesire
	for rows.Next() {
		var d TopicDesire
		if err := rows.Scan(&d.Mirror, &d.Topic, &d.DestTopic, &d.DesiredState, &d.ReplicationFactor, &d.Recreate, &d.ContinueHistory, &d.KeepDivergent); err != nil {
			return nil, interpret(err)
		}
		out = append(out, d)
	}
	return out, interpret(rows.Err())
}

// TopicWorkerState is what partition workers record on their topic's row.
type TopicWorkerState struct {
	SourceTopicID    []byte // nil until recorded
	ReadOnlyEnforced *bool  // nil until recorded
}

// TopicsWorkerState reads what the workers recorded on a topic's row,
// unfenced: the partitions of a topic share the read as they prepare, and
// write through TopicsRecordSourceID and TopicsSetReadOnlyEnforced
// (fenced) only what must change. ErrNotFound: no such topic.
func TopicsWorkerState(ctx context.Context, q DBTX, mirror, topic string) (TopicWorkerState, error) {
	var s TopicWorkerState
	err := q.QueryRow(ctx, `SELECT source_topic_id, read_only_enforced FROM mirror_topics
		WHERE mirror = $1 AND topic = $2`, mirror, topic).Scan(&s.SourceTopicID, &s.ReadOnlyEnforced)
	return s, interpret(err)
}

// TopicsRecordSourceID stores the source topic id of the fence's topic the
// first time, and returns the stored one either way. ErrNotFound means the
// fence no longer holds (or the topic is gone): nothing was written.
//
// Every partition of a topic calls it as it prepares, when the row it read
// had no id yet, and only the first call of a topic writes. The others,
// often waiting on that first write's row lock, then find the id stored
// and neither rewrite nor hold the row, so a dozen partitions preparing at
// once do not write it one after another.
func TopicsRecordSourceID(ctx context.Context, q DBTX, f LeaseFence, id []byte) ([]byte, error) {
	var stored []byte
	err := q.QueryRow(ctx, `UPDATE mirror_topics SET source_topic_id = $6
		WHERE mirror = $1 AND topic = $2 AND source_topic_id IS NULL AND `+fenced+`
		RETURNING source_topic_id`, f.args(id)...).Scan(&stored)
	if !errors.Is(err, pgx.ErrNoRows) {
		return stored, interpret(err)
	}
	// Recorded already, or the fence no longer holds.
	err = q.QueryRow(ctx, `SELECT source_topic_id FROM mirror_topics
		WHERE mirror = $1 AND topic = $2 AND `+fenced, f.args()...).Scan(&stored)
	return stored, interpret(err)
}

// TopicsReplaceSourceID records a new source topic id in place of old,
// fenced: a topic added with continue whose source was recreated, once its
// history was proven. A row that holds the new id already is left as is.
func TopicsReplaceSourceID(ctx context.Context, q DBTX, f LeaseFence, old, id []byte) error {
	_, err := q.Exec(ctx, `UPDATE mirror_topics SET source_topic_id = $7
		WHERE mirror = $1 AND topic = $2 AND source_topic_id = $6 AND `+fenced, f.args(old, id)...)
	return interpret(err)
}

// TopicsSetReadOnlyEnforced records whether the destination enforces the
// fence's topic's read-only ACL. ErrNotFound means the fence no longer
// holds: nothing was written.
//
// As with TopicsRecordSourceID, a topic's row is written only when the
// value changes, not by each of its partitions.
func TopicsSetReadOnlyEnforced(ctx context.Context, q DBTX, f LeaseFence, enforced bool) error {
	tag, err := q.Exec(ctx, `UPDATE mirror_topics SET read_only_enforced = $6
		WHERE mirror = $1 AND topic = $2 AND read_only_enforced IS DISTINCT FROM $6 AND `+fenced, f.args(enforced)...)
	if err != nil || tag.RowsAffected() > 0 {
		return interpret(err)
	}
	// The value is already so, or the fence no longer holds.
	var one int
	return interpret(q.QueryRow(ctx, `SELECT 1 FROM mirror_topics
		WHERE mirror = $1 AND topic = $2 AND `+fenced, f.args()...).Scan(&one))
}

// PartitionsCountStillMirrored counts the fence topic's other partitions
// that are neither STOPPED, STOPPING nor UNKNOWN: while any is, the topic
// stays read-only.
func PartitionsCountStillMirrored(ctx context.Context, q DBTX, f LeaseFence) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM mirror_partitions
		WHERE mirror = $1 AND topic = $2 AND partition <> $3
		  AND coalesce(state, '') NOT IN ('STOPPED', 'STOPPING', '')`, f.Mirror, f.Topic, f.Partition).Scan(&n)
	return n, interpret(err)
}

// TopicsResetForRecreate records, in one transaction, that the fence's
// topic was dropped and created again on the destination: every
// partition's checkpoint and the offset map are forgotten, the recreate
// request is cleared, and the source topic id is taken afresh. The caller
// must hold the fence (the worker of partition 0 does this for the topic);
// otherwise ErrNotFound and nothing changes.
func TopicsResetForRecreate(ctx context.Context, q DBTX, f LeaseFence) error {
	// The topic row is updated first, under the fence, so a stale caller
	// stops before touching any partition.
	tag, err := q.Exec(ctx, `UPDATE mirror_topics SET recreate = false, source_topic_id = NULL
		WHERE mirror = $1 AND topic = $2 AND `+fenced, f.args()...)
	if err != nil {
		return interpret(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	if _, err := q.Exec(ctx, `UPDATE mirror_partitions SET src_next = NULL, dst_next = NULL,
		destination_end_offset = 0, divergent_tail_start = NULL, divergent_tail_end = NULL,
		divergent_tail_records = NULL WHERE mirror = $1 AND topic = $2`, f.Mirror, f.Topic); err != nil {
		return interpret(err)
	}
	_, err = q.Exec(ctx, `DELETE FROM offset_map_runs WHERE mirror = $1 AND topic = $2`, f.Mirror, f.Topic)
	return interpret(err)
}

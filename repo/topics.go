package repo

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"kmirror/internal/vocabulary/states"
)

// Topic is one row of mirror_topics, with its partition count.
type Topic struct {
	Mirror string
	Topic  string
	// DestTopic is the destination topic's name: the mirror's
	// topic.name.prefix, as it was when the row was created, and Topic.
	DestTopic         string
	DesiredState      states.Desired
	ReplicationFactor int
	Recreate          bool
	// ReadOnlyEnforced: nil unknown, else whether the destination enforces
	// read-only with an ACL while the topic is mirrored.
	ReadOnlyEnforced *bool
	Partitions       int
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

const topicSelect = `
	SELECT t.mirror, t.topic, t.dest_topic, t.desired_state, t.replication_factor, t.recreate, t.read_only_enforced,
		(SELECT count(*) FROM mirror_partitions p WHERE p.mirror = t.mirror AND p.topic = t.topic),
		t.created_at, t.updated_at
	FROM mirror_topics t`

func scanTopic(row scanner) (Topic, error) {
	var t Topic
	err := row.Scan(&t.Mirror, &t.Topic, &t.DestTopic, &t.DesiredState, &t.ReplicationFactor, &t.Recreate, &t.ReadOnlyEnforced,
		&t.Partitions, &t.CreatedAt, &t.UpdatedAt)
	return t, interpret(err)
}

// TopicsList returns a mirror's topics by name.
func TopicsList(ctx context.Context, q DBTX, mirror string) ([]Topic, error) {
	return collectTopics(q.Query(ctx, topicSelect+` WHERE t.mirror = $1 ORDER BY t.topic`, mirror))
}

// collectTopics scans the topics a query returned.
func collectTopics(rows pgx.Rows, err error) ([]Topic, error) {
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []Topic
	for rows.Next() {
		t, err := scanTopic(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, interpret(rows.Err())
}

// TopicStateCount is how many partitions of a mirror topic are in one
// state, and their summed lag.
type TopicStateCount struct {
	Topic      string
	State      states.Partition // "" is UNKNOWN
	Partitions int
	// Lag sums source end offset − src_next over the partitions whose
	// source end offset is known, as each describe row computes it.
	Lag int64
}

// TopicsStateCounts counts a mirror's partitions per topic and state in one
// grouped read, so a topic list does not load every partition row.
func TopicsStateCounts(ctx context.Context, q DBTX, mirror string) ([]TopicStateCount, error) {
	rows, err := q.Query(ctx, `SELECT topic, coalesce(state, ''), count(*),
			coalesce(sum(greatest(source_end_offset - coalesce(src_next, 0), 0))
				FILTER (WHERE source_end_offset IS NOT NULL), 0)::bigint
		FROM mirror_partitions WHERE mirror = $1
		GROUP BY 1, 2 ORDER BY 1, 2`, mirror)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []TopicStateCount
	for rows.Next() {
		var c TopicStateCount
		if err := rows.Scan(&c.Topic, &c.State, &c.Partitions, &c.Lag); err != nil {
			return nil, interpret(err)
		}
		out = append(out, c)
	}
	return out, interpret(rows.Err())
}

// TopicsGet returns one mirror topic, or ErrNotFound.
func TopicsGet(ctx context.Context, q DBTX, mirror, topic string) (Topic, error) {
	return scanTopic(q.QueryRow(ctx, topicSelect+` WHERE t.mirror = $1 AND t.topic = $2`, mirror, topic))
}

// TopicsUpsertParams describes a topic being added or restarted.
type TopicsUpsertParams struct {
	Mirror string
	Topic  string
	// DestTopic names the destination topic of a new row ("": Topic). An
	// existing row keeps the name it has.
	DestTopic         string
	DesiredState      states.Desired
	ReplicationFactor int
	Recreate          bool
	// ContinueHistory: the destination may hold the source's history,
	// proven when the partitions start (a failback).
	ContinueHistory bool
	// KeepDivergent: with ContinueHistory, a partition whose destination
	// holds a divergent tail continues after it instead of failing.
	KeepDivergent bool
	// ReadOnlyEnforced: nil unknown, else whether the destination enforces
	// read-only with an ACL while the topic is mirrored.
	ReadOnlyEnforced *bool
	Partitions       int32
}

// TopicsUpsert inserts a topic, or sets the desired state of an existing one,
// and makes sure a partition row exists for each of its partitions.
func TopicsUpsert(ctx context.Context, q DBTX, p TopicsUpsertParams) error {
	_, err := q.Exec(ctx, `
		INSERT INTO mirror_topics (mirror, topic, dest_topic, desired_state, replication_factor, recreate, continue_history, keep_divergent)
		VALUES ($1, $2, coalesce(nullif($8, ''), $2), $3, $4, $5, $6, $7)
		ON CONFLICT (mirror, topic) DO UPDATE SET desired_state = excluded.desired_state,
			replication_factor = excluded.replication_factor, recreate = excluded.recreate,
			continue_history = excluded.continue_history, keep_divergent = excluded.keep_divergent, updated_at = now()`,
		p.Mirror, p.Topic, p.DesiredState, p.ReplicationFactor, p.Recreate, p.ContinueHistory, p.KeepDivergent, p.DestTopic)
	if err != nil {
		return interpret(err)
	}
	_, err = q.Exec(ctx, `
		INSERT INTO mirror_partitions (mirror, topic, partition)
		SELECT $1, $2, g FROM generate_series(0, $3::int - 1) AS g
		ON CONFLICT DO NOTHING`, p.Mirror, p.Topic, p.Partitions)
	return interpret(err)
}

// TopicsSetDesiredState sets the desired state of the named topics.
func TopicsSetDesiredState(ctx context.Context, q DBTX, mirror string, topics []string, desired states.Desired) error {
	tag, err := q.Exec(ctx, `
		UPDATE mirror_topics SET desired_state = $3, updated_at = now()
		WHERE mirror = $1 AND topic = ANY($2)`, mirror, topics, desired)
	if err != nil {
		return interpret(err)
	}
	if int(tag.RowsAffected()) != len(topics) {
		return ErrNotFound
	}
	return nil
}

// NotStopped counts a mirror's topics that are not yet stopped.
type NotStopped struct {
	// Wanted: topics whose desired state is not stopped.
	Wanted int
	// Stopping: topics removed (desired stopped) whose partitions have not
	// all reached STOPPED yet.
	Stopping int
}

// TopicsCountNotStopped counts, in one query, a mirror's topics that are
// not stopped, by why.
func TopicsCountNotStopped(ctx context.Context, q DBTX, mirror string) (NotStopped, error) {
	var n NotStopped
	err := q.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE t.desired_state <> 'stopped'),
			count(*) FILTER (WHERE t.desired_state = 'stopped' AND EXISTS (
				SELECT 1 FROM mirror_partitions p
				WHERE p.mirror = t.mirror AND p.topic = t.topic
				  AND p.state IS NOT NULL AND p.state <> 'STOPPED'))
		FROM mirror_topics t WHERE t.mirror = $1`, mirror).Scan(&n.Wanted, &n.Stopping)
	return n, interpret(err)
}

// TopicFacts is what a describe row takes from its topic's row.
type TopicFacts struct {
	DestTopic        string
	ReadOnlyEnforced *bool
}

// TopicsDescribeFacts maps (mirror, topic) to the facts describe rows take
// from the topic's row, for one mirror or, with mirror "", for all.
func TopicsDescribeFacts(ctx context.Context, q DBTX, mirror string) (map[[2]string]TopicFacts, error) {
	rows, err := q.Query(ctx, `SELECT mirror, topic, dest_topic, read_only_enforced FROM mirror_topics
		WHERE $1 = '' OR mirror = $1`, mirror)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	out := map[[2]string]TopicFacts{}
	for rows.Next() {
		var m, t string
		var f TopicFacts
		if err := rows.Scan(&m, &t, &f.DestTopic, &f.ReadOnlyEnforced); err != nil {
			return nil, interpret(err)
		}
		out[[2]string{m, t}] = f
	}
	return out, interpret(rows.Err())
}

// Writer is the mirror writing a destination topic, and the source topic
// it writes it from.
type Writer struct {
	Mirror string
	Topic  string
}

// TopicsWrittenElsewhere maps each of the destination topics that another
// mirror than mirror writes (desired state not stopped) to that mirror and
// its source topic.
func TopicsWrittenElsewhere(ctx context.Context, q DBTX, mirror string, destTopics []string) (map[string]Writer, error) {
	rows, err := q.Query(ctx, `SELECT dest_topic, mirror, topic FROM mirror_topics
		WHERE dest_topic = ANY($2) AND mirror <> $1 AND desired_state <> 'stopped'`, mirror, destTopics)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	out := map[string]Writer{}
	for rows.Next() {
		var d string
		var w Writer
		if err := rows.Scan(&d, &w.Mirror, &w.Topic); err != nil {
			return nil, interpret(err)
		}
		out[d] = w
	}
	return out, interpret(rows.Err())
}

// TopicsDestNames maps a mirror's topics, stopped ones too, to their
// destination names.
func TopicsDestNames(ctx context.Context, q DBTX, mirror string) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT topic, dest_topic FROM mirror_topics WHERE mirror = $1`, mirror)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var t, d string
		if err := rows.Scan(&t, &d); err != nil {
			return nil, interpret(err)
		}
		out[t] = d
	}
	return out, interpret(rows.Err())
}

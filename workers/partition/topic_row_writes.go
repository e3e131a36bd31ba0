package partition

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/repo"
	"kmirror/service"
)

// topicRows is what the workers record on their topic's row
// (worker.TopicRows): the writes the service's Workers face makes, with the
// reads shared and the same write by several partitions made once.
type topicRows struct {
	*service.Workers
	pool   *pgxpool.Pool
	shared *sharedReads
}

// TopicState reads what the workers recorded on a topic's row, once for
// the topic's partitions that ask together.
func (t *topicRows) TopicState(ctx context.Context, mirror, topic string) (repo.TopicWorkerState, error) {
	return t.shared.topicStates.do(ctx, [2]string{mirror, topic}, func(ctx context.Context) (repo.TopicWorkerState, error) {
		return repo.TopicsWorkerState(ctx, t.pool, mirror, topic)
	})
}

// RecordSourceTopicID records the source topic's id, once for the
// topic's partitions that find none recorded together.
func (t *topicRows) RecordSourceTopicID(ctx context.Context, f repo.LeaseFence, id []byte) ([]byte, error) {
	return t.shared.writeTopicRow(ctx, f, "source_topic_id="+hex.EncodeToString(id), func(ctx context.Context, f repo.LeaseFence) ([]byte, error) {
		return t.Workers.RecordSourceTopicID(ctx, f, id)
	})
}

// RecordReadOnlyEnforced records whether the read-only ACL is enforced,
// once for the topic's partitions that change it together.
func (t *topicRows) RecordReadOnlyEnforced(ctx context.Context, f repo.LeaseFence, enforced bool) error {
	_, err := t.shared.writeTopicRow(ctx, f, fmt.Sprint("read_only_enforced=", enforced), func(ctx context.Context, f repo.LeaseFence) ([]byte, error) {
		return nil, t.Workers.RecordReadOnlyEnforced(ctx, f, enforced)
	})
	return err
}

// CountStillMirrored counts the topic's other partitions not yet stopped.
func (t *topicRows) CountStillMirrored(ctx context.Context, f repo.LeaseFence) (int, error) {
	return repo.PartitionsCountStillMirrored(ctx, t.pool, f)
}

// topicWriteKey names one write of a topic's row by its partitions' workers:
// the topic and what the write records (a value, not just a column).
type topicWriteKey struct {
	mirror, topic, what string
}

// topicWritten is a shared topic-row write's outcome: the fence it ran
// under, and what the row holds (TopicsRecordSourceID's answer).
type topicWritten struct {
	by     repo.LeaseFence
	stored []byte
}

// writeTopicRow makes a fenced write of the fence's topic row once for the
// topic's partitions that make the same write while it runs. The twelve
// partitions of a new topic read the row together and find nothing
// recorded; each writing the same value would queue twelve updates on the
// row's lock, one after another, spreading their MIRRORING and splitting
// their state changes and fetcher adds into several groups.
//
// The write runs under the fence of the partition that started it. If that
// fence no longer holds (its lease moved on), a partition that joined
// writes again under its own, so a lease lost elsewhere never stops it.
func (s *sharedReads) writeTopicRow(ctx context.Context, f repo.LeaseFence, what string,
	write func(ctx context.Context, f repo.LeaseFence) ([]byte, error)) ([]byte, error) {
	res, err := s.topicWrites.join(ctx, topicWriteKey{f.Mirror, f.Topic, what}, func(ctx context.Context) (topicWritten, error) {
		stored, err := write(ctx, f)
		return topicWritten{by: f, stored: stored}, err
	})
	if errors.Is(err, repo.ErrNotFound) && res.by != f {
		return write(ctx, f)
	}
	return res.stored, err
}

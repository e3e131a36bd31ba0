package partition

import (
	"context"
	"errors"

	"kmirror/repo"
)

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
func (e *Engine) writeTopicRow(ctx context.Context, f repo.LeaseFence, what string,
	write func(ctx context.Context, f repo.LeaseFence) ([]byte, error)) ([]byte, error) {
	res, err := e.shared.topicWrites.join(ctx, topicWriteKey{f.Mirror, f.Topic, what}, func(ctx context.Context) (topicWritten, error) {
		stored, err := write(ctx, f)
		return topicWritten{by: f, stored: stored}, err
	})
	if errors.Is(err, repo.ErrNotFound) && res.by != f {
		return write(ctx, f)
	}
	return res.stored, err
}

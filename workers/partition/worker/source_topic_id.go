package worker

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"kmirror/repo"
)

// sourceTopicCheck is what checkSourceTopicID found.
type sourceTopicCheck struct {
	// compared: the source has topic ids and the topic's is the one
	// recorded, so the topic is the one mirrored so far.
	compared bool
	// unrecorded is the source topic's id when none was recorded yet and
	// the caller records it itself (zero otherwise).
	unrecorded [16]byte
}

// checkSourceTopicID compares the source topic's id with the one recorded
// when mirroring began. A different id means the topic was deleted and
// created again: its offsets start over, so mirroring it into the same
// destination would mix two topics. With none recorded it records this
// one, or, unless record, leaves that to the caller (unrecorded): an
// alignment records it only once it has proven the partition against the
// topic (recordSourceTopicID), so that a recorded id always names the
// topic that was mirrored, and another partition may rely on it.
func (w *Worker) checkSourceTopicID(ctx context.Context, src Source, record bool) (sourceTopicCheck, error) {
	meta, err := src.Topic(ctx, w.key.Topic)
	if err != nil {
		return sourceTopicCheck{}, retryable("describe source topic: %v", err)
	}
	if !meta.Exists {
		return sourceTopicCheck{}, retryable("source topic %s does not exist", w.key.Topic)
	}
	var zero [16]byte
	if meta.ID == zero {
		return sourceTopicCheck{}, nil // an old broker without topic ids: nothing to compare
	}
	id := meta.ID
	// The topic's partitions share the read of what is recorded; those that
	// find nothing share one write (fenced).
	state, err := w.p.Topics.TopicState(ctx, w.key.Mirror, w.key.Topic)
	if errors.Is(err, repo.ErrNotFound) {
		return sourceTopicCheck{}, errStop // the topic is gone
	}
	if err != nil {
		return sourceTopicCheck{}, retryable("read source topic id: %v", err)
	}
	if state.SourceTopicID == nil {
		if !record {
			return sourceTopicCheck{unrecorded: id}, nil
		}
		return sourceTopicCheck{}, w.recordSourceTopicID(ctx, id)
	}
	if !bytes.Equal(state.SourceTopicID, id[:]) {
		return sourceTopicCheck{}, &sourceTopicReplaced{topic: w.key.Topic, stored: state.SourceTopicID, id: id[:]}
	}
	return sourceTopicCheck{compared: true}, nil
}

// recordSourceTopicID records the source topic's id where none is, and
// fails as checkSourceTopicID does if another was recorded meanwhile.
func (w *Worker) recordSourceTopicID(ctx context.Context, id [16]byte) error {
	stored, err := w.p.Topics.RecordSourceTopicID(ctx, w.fence(), id[:])
	if errors.Is(err, repo.ErrNotFound) {
		return errStop // the lease moved on
	}
	if err != nil {
		return retryable("record source topic id: %v", err)
	}
	if !bytes.Equal(stored, id[:]) {
		return &sourceTopicReplaced{topic: w.key.Topic, stored: stored, id: id[:]}
	}
	return nil
}

// sourceTopicReplaced: the source topic's id is not the one recorded, so
// the topic was deleted and created again. It fails the partition for good,
// unless the topic was added with continue and the destination's history
// is proven afresh against the new topic (a failback after the other side
// recreated it): then the new id is recorded instead (acceptNewSourceTopic).
type sourceTopicReplaced struct {
	topic      string
	stored, id []byte
}

func (e *sourceTopicReplaced) Error() string { return e.Unwrap().Error() }

// Unwrap is the permanent failure it is, unless a continue accepts it.
func (e *sourceTopicReplaced) Unwrap() error {
	return permanent("source topic %s was deleted and recreated (topic id %s, mirrored from %s): "+
		"remove the topic and add it with recreate to mirror the new one, or with continue if the new topic "+
		"holds this destination's history (the other side recreated it from here)",
		e.topic, hex.EncodeToString(e.id), hex.EncodeToString(e.stored))
}

// acceptNewSourceTopic records the new id of a source topic whose history
// a continue proved.
func (w *Worker) acceptNewSourceTopic(ctx context.Context, r *sourceTopicReplaced) error {
	if err := w.p.Topics.AcceptRecreatedSourceTopic(ctx, w.fence(), r.stored, r.id); err != nil {
		return retryable("record the new source topic id: %v", err)
	}
	return nil
}

// resumeCheck runs before PAUSED → MIRRORING, which skips alignment.
func (w *Worker) resumeCheck(ctx context.Context) error {
	src, err := w.p.Sources.Source(ctx, w.key.Mirror)
	if err != nil {
		return retryable("source: %v", err)
	}
	if _, err := w.checkSourceTopicID(ctx, src, true); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return nil
}

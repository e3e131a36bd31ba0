package worker

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"kmirror/repo"
)

// checkSourceTopicID compares the source topic's id with the one recorded
// when mirroring began, recording it the first time. A different id means
// the topic was deleted and created again: its offsets start over, so
// mirroring it into the same destination would mix two topics. compared
// says an id was recorded before and the source has topic ids, so that a
// nil error proves the topic is the one mirrored so far (an id recorded
// only now proves nothing of the records before).
func (w *Worker) checkSourceTopicID(ctx context.Context, src *Source) (compared bool, err error) {
	meta, err := w.eng.SourceTopicID(ctx, src, w.key.Topic)
	if err != nil {
		return false, retryable("describe source topic: %v", err)
	}
	if !meta.Exists {
		return false, retryable("source topic %s does not exist", w.key.Topic)
	}
	var zero [16]byte
	if meta.ID == zero {
		return false, nil // an old broker without topic ids: nothing to compare
	}
	id := meta.ID
	// The topic's partitions share the read of what is recorded; those that
	// find nothing share one write (fenced).
	state, err := w.eng.TopicState(ctx, w.key.Mirror, w.key.Topic)
	if errors.Is(err, repo.ErrNotFound) {
		return true, errStop // the topic is gone
	}
	if err != nil {
		return true, retryable("read source topic id: %v", err)
	}
	stored := state.SourceTopicID
	recorded := stored != nil
	if stored == nil {
		stored, err = w.eng.WriteTopicRow(ctx, w.fence(), "source_topic_id="+hex.EncodeToString(id[:]), func(ctx context.Context, f repo.LeaseFence) ([]byte, error) {
			return w.cfg.Service.RecordSourceTopicID(ctx, f, id[:])
		})
		if errors.Is(err, repo.ErrNotFound) {
			return true, errStop // the lease moved on
		}
		if err != nil {
			return true, retryable("record source topic id: %v", err)
		}
	}
	if !bytes.Equal(stored, id[:]) {
		return true, &sourceTopicReplaced{topic: w.key.Topic, stored: stored, id: id[:]}
	}
	return recorded, nil
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
	if err := w.cfg.Service.AcceptRecreatedSourceTopic(ctx, w.fence(), r.stored, r.id); err != nil {
		return retryable("record the new source topic id: %v", err)
	}
	return nil
}

// resumeCheck runs before PAUSED → MIRRORING, which skips alignment.
func (w *Worker) resumeCheck(ctx context.Context) error {
	src, err := w.eng.Source(ctx, w.key.Mirror)
	if err != nil {
		return retryable("source: %v", err)
	}
	if _, err := w.checkSourceTopicID(ctx, src); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return nil
}

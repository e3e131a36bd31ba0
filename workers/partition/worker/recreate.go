package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"kmirror/repo"
)

// recreateTimeout bounds dropping and recreating a destination topic.
const recreateTimeout = 30 * time.Second

// recreateDestination serves a restart that asked for recreate: the worker of
// partition 0 drops and recreates the destination topic, forgets every
// partition's checkpoint and offset map, and clears the request; mirroring
// then starts from the source's log start. The other partitions wait in
// PREPARING until it has. Repeating it after a crash is harmless.
func (w *Worker) recreateDestination(ctx context.Context, desire Desire) error {
	ctx, cancel := context.WithTimeout(ctx, recreateTimeout)
	defer cancel()
	src, err := w.p.Sources.Source(ctx, w.key.Mirror)
	if err != nil {
		return retryable("source: %v", err)
	}
	st, err := src.Topic(ctx, w.key.Topic)
	if err != nil {
		return retryable("describe source topic: %v", err)
	}
	if !st.Exists {
		return retryable("source topic %s does not exist", w.key.Topic)
	}
	// The engine's admin client drops it, creates it again once the
	// deletion is done, and has the producer forget the old topic's id and
	// sequence numbers.
	if err := w.p.Destination.RecreateTopic(ctx, w.dest, int32(st.Partitions), int16(desire.ReplicationFactor)); err != nil {
		return err
	}
	err = w.p.Topics.RecordDestinationRecreated(ctx, w.fence())
	if errors.Is(err, repo.ErrNotFound) {
		return errStop // the lease moved on
	}
	if err != nil {
		return retryable("record recreated destination topic: %v", err)
	}
	w.row.SrcNext, w.row.DstNext = nil, nil
	w.log.Info("destination topic dropped and recreated", "destination_topic", w.dest, "partitions", st.Partitions)
	if err := w.p.Desires.Refresh(ctx); err != nil {
		return retryable("read desired state: %v", err)
	}
	return nil
}

// reloadCheckpoint re-reads this partition's checkpoint after another
// worker reset it.
func (w *Worker) reloadCheckpoint(ctx context.Context) error {
	row, err := w.p.Rows.Row(w.id())
	if err != nil {
		return retryable("reload partition: %v", err)
	}
	if row.LeaseOwner != w.lease.Owner || row.LeaseEpoch != w.lease.Epoch {
		return fmt.Errorf("%w", errStop)
	}
	w.row.SrcNext, w.row.DstNext = row.SrcNext, row.DstNext
	return nil
}

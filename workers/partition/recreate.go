package partition

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"

	"kmirror/repo"
)

// recreateTimeout bounds dropping and recreating a destination topic.
const recreateTimeout = 30 * time.Second

// recreateDestination serves a restart that asked for recreate: the worker of
// partition 0 drops and recreates the destination topic, forgets every
// partition's checkpoint and offset map, and clears the request; mirroring
// then starts from the source's log start. The other partitions wait in
// PREPARING until it has. Repeating it after a crash is harmless.
func (w *partitionWorker) recreateDestination(ctx context.Context, desire topicDesire) error {
	ctx, cancel := context.WithTimeout(ctx, recreateTimeout)
	defer cancel()
	src, err := w.e.source(ctx, w.key.Mirror)
	if err != nil {
		return retryable("source: %v", err)
	}
	st, err := src.admin.ListTopics(ctx, w.key.Topic)
	if err != nil {
		return retryable("describe source topic: %v", err)
	}
	sd, ok := st[w.key.Topic]
	if !ok || sd.Err != nil {
		return retryable("source topic %s does not exist", w.key.Topic)
	}
	// A topic that is already gone (deleted by hand, a destination rebuilt
	// empty, or never created) counts as deleted. kadm returns the topic's
	// own error as err too.
	if _, err := w.e.dstAdmin.DeleteTopic(ctx, w.key.Topic); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return retryable("delete destination topic %s: %v", w.key.Topic, err)
	}
	// Deletion completes asynchronously on a real cluster.
	for {
		resp, err := w.e.dstAdmin.CreateTopic(ctx, int32(len(sd.Partitions)), int16(desire.replicationFactor), nil, w.key.Topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return retryable("recreate destination topic %s: %v", w.key.Topic, err)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	// The producer must forget the old topic's id and sequence numbers.
	w.e.writeOff(w.key.Topic, "the destination topic was recreated")
	err = repo.WithTx(ctx, w.e.cfg.Pool, func(tx pgx.Tx) error {
		return repo.TopicsResetForRecreate(ctx, tx, w.fence())
	})
	if errors.Is(err, repo.ErrNotFound) {
		return errStop // the lease moved on
	}
	if err != nil {
		return retryable("record recreated destination topic: %v", err)
	}
	w.row.SrcNext, w.row.DstNext = nil, nil
	w.log.Info("destination topic dropped and recreated", "partitions", len(sd.Partitions))
	if err := w.e.desired.refresh(ctx); err != nil {
		return retryable("read desired state: %v", err)
	}
	return nil
}

// reloadCheckpoint re-reads this partition's checkpoint after another
// worker reset it.
func (w *partitionWorker) reloadCheckpoint(ctx context.Context) error {
	row, err := repo.PartitionsGet(ctx, w.e.cfg.Pool, w.key.Mirror, w.key.Topic, w.key.Partition)
	if err != nil {
		return retryable("reload partition: %v", err)
	}
	if row.LeaseOwner != w.lease.Owner || row.LeaseEpoch != w.lease.Epoch {
		return fmt.Errorf("%w", errStop)
	}
	w.row.SrcNext, w.row.DstNext = row.SrcNext, row.DstNext
	return nil
}

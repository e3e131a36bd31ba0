package service

import (
	"context"

	"github.com/jackc/pgx/v5"

	"kmirror/repo"
)

// The workers' writes of what they learn about a topic or a partition. Each
// is fenced by the lease the worker holds: a write under a lease that moved
// on changes nothing and answers repo.ErrNotFound, which tells the worker to
// stop.

// RecordSourceTopicID records the source topic's id the first time a
// partition of the topic prepares, and returns the id stored either way. A
// different stored id means the source topic was deleted and created again.
func (s *Workers) RecordSourceTopicID(ctx context.Context, f repo.LeaseFence, id []byte) ([]byte, error) {
	return repo.TopicsRecordSourceID(ctx, s.pool, f, id)
}

// AcceptRecreatedSourceTopic records a recreated source topic's new id in
// place of old, once a continue has proven that the new topic holds this
// destination's history (the other side of a failback recreated it).
func (s *Workers) AcceptRecreatedSourceTopic(ctx context.Context, f repo.LeaseFence, old, id []byte) error {
	return repo.TopicsReplaceSourceID(ctx, s.pool, f, old, id)
}

// RecordDestinationRecreated records that a restart with recreate dropped
// and created the destination topic again: every partition's checkpoint,
// kept divergent tail and offset map are forgotten, the request is cleared
// and the source topic id is taken afresh, all or nothing.
func (s *Workers) RecordDestinationRecreated(ctx context.Context, f repo.LeaseFence) error {
	return repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		return repo.TopicsResetForRecreate(ctx, tx, f)
	})
}

// RecordReadOnlyEnforced records whether the destination enforces the
// topic's read-only ACL, which describe reports.
func (s *Workers) RecordReadOnlyEnforced(ctx context.Context, f repo.LeaseFence, enforced bool) error {
	return repo.TopicsSetReadOnlyEnforced(ctx, s.pool, f, enforced)
}

// RecordPartitionError records (or, with "", clears) an error that a
// partition keeps retrying through without leaving state.
func (s *Workers) RecordPartitionError(ctx context.Context, f repo.LeaseFence, state PartitionState, msg string) error {
	return repo.PartitionsSetError(ctx, s.pool, f, state, msg)
}

// RecordPartitionLoss records that the destination lost a partition's
// records, with the destination's end offset as found, which describe
// shows from then on rather than the end the last checkpoint saw.
func (s *Workers) RecordPartitionLoss(ctx context.Context, f repo.LeaseFence, state PartitionState, msg string, dstEnd int64) error {
	return repo.PartitionsSetErrorEnd(ctx, s.pool, f, state, msg, max(dstEnd, 0))
}

// KeepDivergentTail records the divergent tail that a failback with
// keep_divergent left on the destination (nil clears it), so describe
// shows it and offset translation rounds down across it.
func (s *Workers) KeepDivergentTail(ctx context.Context, f repo.LeaseFence, t *DivergentTail) error {
	return repo.PartitionsSetDivergentTail(ctx, s.pool, f, t)
}

package service

import (
	"context"

	"kmirror/repo"
)

// The workers' reads and writes of a partition's offset map while they
// align it: where mirroring began, the run that holds a destination offset,
// and cutting the map back to what the destination still holds. The reads
// answer repo.ErrNotFound when no run matches; the writes are fenced by the
// worker's lease.

// FirstRun returns the partition's earliest run: where mirroring began.
func (s *Workers) FirstRun(ctx context.Context, id repo.PartitionID) (repo.OffsetRun, error) {
	return repo.OffsetRunsFirst(ctx, s.pool, id.Mirror, id.Topic, id.Partition)
}

// RunAt returns the run that holds destination offset dst.
func (s *Workers) RunAt(ctx context.Context, id repo.PartitionID, dst int64) (repo.OffsetRun, error) {
	return repo.OffsetRunByDestination(ctx, s.pool, id.Mirror, id.Topic, id.Partition, dst)
}

// TruncateRuns cuts the map back to the destination offsets below dstEnd:
// the destination lost the rest.
func (s *Workers) TruncateRuns(ctx context.Context, f repo.LeaseFence, dstEnd int64) error {
	return repo.OffsetRunsTruncate(ctx, s.pool, f, dstEnd)
}

// DeleteRuns empties the partition's map.
func (s *Workers) DeleteRuns(ctx context.Context, f repo.LeaseFence) error {
	return repo.OffsetRunsDelete(ctx, s.pool, f)
}

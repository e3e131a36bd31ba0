package partition

import "context"

// prepareSlots bound how many partitions load, align or re-align at once.
// Taking thousands of leases at start-up would otherwise start as many
// alignments together, each needing a database connection and source and
// destination round trips: they would queue on the pool until their
// timeouts and fail by the hundred. In slots, they wait their turn.
type prepareSlots chan struct{}

// newPrepareSlots sizes the slots to keep every pool connection busy with
// some network waits overlapping, and never fewer than 16.
func newPrepareSlots(poolConns int32) prepareSlots {
	return make(prepareSlots, max(16, 4*int(poolConns)))
}

// acquire waits for a slot, or for ctx; release gives it back.
func (s prepareSlots) acquire(ctx context.Context) (release func(), err error) {
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-ctx.Done():
		return func() {}, context.Cause(ctx)
	}
}

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

// takeoverSlots bound the partitions that load their row and re-align
// after a new lease at once. A takeover handed back cleanly needs only
// coalesced reads and a grouped write (shared_reads.go,
// grouped_statements.go): no connection of its own, so many at once make
// bigger groups, not a longer queue: each wave of slots is a chain of
// coalesced round trips, so fewer, wider waves hand partitions on sooner.
// Records past a crashed owner's checkpoint are read back in groups too
// (record_reads.go); only a rewind through the offset map, or the check of
// a source without topic ids, takes a prepare slot as well (the worker's
// readSlot), so the bound here is only on goroutines waiting in groups.
const takeoverSlots = 8192

// Acquire waits for a slot, or for ctx; release gives it back.
func (s prepareSlots) Acquire(ctx context.Context) (release func(), err error) {
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-ctx.Done():
		return func() {}, context.Cause(ctx)
	}
}

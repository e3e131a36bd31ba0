package partition

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/repo"
	"kmirror/service"
)

// partitionRows is the partition rows as the workers read and write them
// (worker.PartitionRows): state changes, realignments and row reads in
// groups, and the service's fenced writes of a partition's error.
type partitionRows struct {
	*service.Workers
	states   *grouped[service.PartitionTransition, repo.Partition]
	realigns *grouped[service.PartitionRealignment, repo.Partition]
	rows     *grouped[repo.PartitionID, repo.Partition]
}

func newPartitionRows(svc *service.Workers, pool *pgxpool.Pool, log *slog.Logger) *partitionRows {
	return &partitionRows{Workers: svc, states: newStateWrites(svc, stateWriteTimeout, log),
		realigns: newRealignments(svc, stateWriteTimeout, log), rows: newRowReads(pool, log)}
}

// Row reads a partition's row, in a group with the others' of the moment.
func (r *partitionRows) Row(id repo.PartitionID) (repo.Partition, error) { return r.rows.do(id) }

// Transition writes a state change, in a group with the others'.
func (r *partitionRows) Transition(t service.PartitionTransition) (repo.Partition, error) {
	return r.states.do(t)
}

// Realign records a realignment, in a group with the others'.
func (r *partitionRows) Realign(a service.PartitionRealignment) (repo.Partition, error) {
	return r.realigns.do(a)
}

// stateWriteTimeout bounds one statement of the engine's state changes.
// The statement runs apart from the workers' contexts: a worker asked to
// stop still records the change it was making.
const stateWriteTimeout = 5 * time.Second

// groupMax bounds the requests in one grouped statement.
const groupMax = 1000

// groupLinger is how long a burst's first state change or row read waits
// for the others (grouped.linger). A lone change pays it once: it is a
// fraction of the statement's own time.
const groupLinger = time.Millisecond

// newStateWrites commits the instance's partition state changes in groups
// (grouped). Each change commits with a NOTIFY (the __mirror_state outbox),
// and Postgres serializes such commits, flush included: one commit each,
// the twelve partitions of a new topic would write their first change one
// after another, and thousands of partitions starting at once would queue
// twice as many commits.
func newStateWrites(svc *service.Workers, timeout time.Duration, log *slog.Logger) *grouped[service.PartitionTransition, repo.Partition] {
	return newGroupedWrites("state changes", timeout, log, svc.TransitionPartitions)
}

// newRealignments commits the instance's realignments in groups, for the
// same reason: after a hand-back the new owner re-aligns thousands of
// partitions at once, and each realignment commits with a NOTIFY too.
func newRealignments(svc *service.Workers, timeout time.Duration, log *slog.Logger) *grouped[service.PartitionRealignment, repo.Partition] {
	return newGroupedWrites("realignments", timeout, log, svc.RecordRealignments)
}

// newGroupedWrites commits a group of partition writes in one statement
// (write). If Postgres refuses the statement itself (a constraint or a
// character it cannot store, say), each write is made alone, so that one
// bad write fails only its own partition. An error from the connection or
// a timeout is every write's: alone they would only wait for the same
// outage once each.
func newGroupedWrites[W any](what string, timeout time.Duration, log *slog.Logger,
	write func(ctx context.Context, ws []W) ([]repo.Partition, []error)) *grouped[W, repo.Partition] {
	var commit func(ws []W) ([]repo.Partition, []error)
	commit = func(ws []W) ([]repo.Partition, []error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		rows, errs := write(ctx, ws)
		if err := statementError(errs); len(ws) > 1 && err != nil && !errors.Is(err, repo.ErrUnavailable) {
			log.Warn("a group of "+what+" was refused; writing them one by one", "writes", len(ws), "err", err)
			for i := range ws {
				r, e := commit(ws[i : i+1])
				rows[i], errs[i] = r[0], e[0]
			}
		}
		return rows, errs
	}
	return newGrouped(what, groupMax, groupLinger, log, commit)
}

// statementError is the error of the statement itself among a group's
// errors, which is every written change's: not one change's own invalid
// step or lost lease.
func statementError(errs []error) error {
	var invalid *service.InvalidTransitionError
	for _, err := range errs {
		if err != nil && !errors.Is(err, service.ErrLeaseLost) && !errors.As(err, &invalid) {
			return err
		}
	}
	return nil
}

// newRowReads reads partition rows in groups (grouped): a worker reads its
// row when it takes a lease, and the partitions of a new topic take theirs
// in one lease pass. Twelve reads at once on twelve connections queue on
// a small machine's cores; grouped they are one or two statements.
func newRowReads(pool *pgxpool.Pool, log *slog.Logger) *grouped[repo.PartitionID, repo.Partition] {
	return newGrouped("partition reads", groupMax, groupLinger, log, func(ids []repo.PartitionID) ([]repo.Partition, []error) {
		ctx, cancel := context.WithTimeout(context.Background(), sharedDBTimeout)
		defer cancel()
		rows, err := repo.PartitionsGetMany(ctx, pool, ids)
		found := make(map[repo.PartitionID]repo.Partition, len(rows))
		for _, r := range rows {
			found[repo.PartitionID{Mirror: r.Mirror, Topic: r.Topic, Partition: r.Partition}] = r
		}
		out, errs := make([]repo.Partition, len(ids)), make([]error, len(ids))
		for i, id := range ids {
			r, ok := found[id]
			switch {
			case err != nil:
				errs[i] = err
			case !ok:
				errs[i] = repo.ErrNotFound
			default:
				out[i] = r
			}
		}
		return out, errs
	})
}

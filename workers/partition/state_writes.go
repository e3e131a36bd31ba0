package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"kmirror/repo"
	"kmirror/service"
)

// stateWriteTimeout bounds one statement of state changes. Like a single
// change before, it runs apart from the worker's context: a worker asked to
// stop still records the change it was making.
const stateWriteTimeout = 5 * time.Second

// stateWriteMax bounds the changes in one statement.
const stateWriteMax = 1000

// stateWrites commits the instance's partition state changes in groups:
// one statement runs at a time, and the changes asked for while it runs go
// together in the next. A change asked for alone is written at once.
//
// Each change commits with a NOTIFY (the __mirror_state outbox), and
// Postgres serializes such commits, flush included: the twelve partitions
// of a new topic wrote their first change one after another over 10-20 ms
// before, and 10,000 partitions starting at once queued 20,000 commits.
type stateWrites struct {
	svc *service.Service
	log *slog.Logger

	mu      sync.Mutex
	queue   []*stateWrite
	running bool
}

type stateWrite struct {
	t    service.PartitionTransition
	done chan struct{} // closed when row and err are set
	row  repo.Partition
	err  error
}

func newStateWrites(svc *service.Service, log *slog.Logger) *stateWrites {
	return &stateWrites{svc: svc, log: log}
}

// write records one state change (service.TransitionPartition's errors)
// and waits for it, whatever the caller's context: a change whose outcome
// is unknown would leave the worker's idea of its row wrong.
func (s *stateWrites) write(t service.PartitionTransition) (repo.Partition, error) {
	w := &stateWrite{t: t, done: make(chan struct{})}
	s.mu.Lock()
	s.queue = append(s.queue, w)
	if !s.running {
		s.running = true
		go s.run()
	}
	s.mu.Unlock()
	<-w.done
	return w.row, w.err
}

// run writes what is queued, group by group, until nothing is.
func (s *stateWrites) run() {
	for {
		s.mu.Lock()
		n := min(len(s.queue), stateWriteMax)
		if n == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		group := s.queue[:n:n]
		s.queue = s.queue[n:]
		s.mu.Unlock()
		s.commit(group)
		for _, w := range group {
			close(w.done)
		}
	}
}

// commit writes a group in one statement. If Postgres refuses the
// statement itself (a constraint or a character it cannot store, say), each change is written alone, so
// that one bad change fails only its own partition. An error from the
// connection or a timeout is every change's: alone they would only wait
// for the same outage once each.
func (s *stateWrites) commit(group []*stateWrite) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic writing partition state changes", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			for _, w := range group {
				w.err = fmt.Errorf("panic writing the state change: %v", v)
			}
		}
	}()
	ts := make([]service.PartitionTransition, len(group))
	for i, w := range group {
		ts[i] = w.t
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateWriteTimeout)
	defer cancel()
	rows, errs := s.svc.TransitionPartitions(ctx, ts)
	if err := statementError(errs); len(group) > 1 && err != nil && !errors.Is(err, repo.ErrUnavailable) {
		s.log.Warn("a group of state changes was refused; writing them one by one", "changes", len(group), "err", err)
		for _, w := range group {
			s.commit([]*stateWrite{w})
		}
		return
	}
	for i, w := range group {
		w.row, w.err = rows[i], errs[i]
	}
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

package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/runtime/startstop"
)

// steps records what the server is doing while it starts and stops, so
// that a shutdown held past its grace period names what held it.
type steps struct {
	mu      sync.Mutex
	running map[string]time.Time
}

// begin records that the step called name runs, until the returned end is
// called.
func (s *steps) begin(name string) (end func()) {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		s.running = map[string]time.Time{}
	}
	s.running[name] = time.Now()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.running, name)
	}
}

// names lists the running steps, sorted.
func (s *steps) names() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.running))
	for n := range s.running {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// named is a component with the name its stop is logged under.
type named struct {
	startstop.Service
	name   string
	log    *slog.Logger
	budget *startstop.Budget
	steps  *steps
}

// Start starts the component, recorded as a running step.
func (n named) Start(ctx context.Context) error {
	defer n.steps.begin("starting " + n.name)()
	return n.Service.Start(ctx)
}

// stopGrace is how long past the shutdown budget a component's stop is
// waited for: long enough to notice the budget's end (each of its waits is
// bounded by what is left), short enough that the process still exits
// within its grace period.
const stopGrace = 100 * time.Millisecond

// Stop stops the component and logs how long that took, so an operator
// whose server was slow to stop can see which step held it. Once a
// shutdown has begun, it waits no longer than what is left of the budget
// (and stopGrace): a component still stopping then is named at once and
// left to end with the process, and the steps after it go on, so that no
// step can take the whole shutdown past its bound unseen.
func (n named) Stop() {
	start := time.Now()
	end := n.steps.begin("stopping " + n.name)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer end()
		n.Service.Stop()
	}()
	if n.budget.Begun() {
		t := time.NewTimer(n.budget.Left(time.Hour) + stopGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			n.log.Warn("slow to stop: still stopping when the shutdown budget was spent; going on without it",
				"component", n.name, "took", time.Since(start).Round(time.Millisecond))
			return
		}
	} else {
		<-done
	}
	took := time.Since(start)
	if took > time.Second {
		n.log.Warn("slow to stop", "component", n.name, "took", took.Round(time.Millisecond))
		return
	}
	n.log.Debug("stopped", "component", n.name, "took", took.Round(time.Millisecond))
}

// namer names components for their stop logs, bounding each stop by the
// shutdown budget.
type namer struct {
	log    *slog.Logger
	budget *startstop.Budget
	steps  *steps
}

// nameAll names the components in start order for their stop logs.
func (nm namer) nameAll(svcs []startstop.Service, names ...string) []startstop.Service {
	out := make([]startstop.Service, len(svcs))
	for i, s := range svcs {
		name := "component"
		if i < len(names) {
			name = names[i]
		}
		out[i] = named{Service: s, name: name, log: nm.log, budget: nm.budget, steps: nm.steps}
	}
	return out
}

// shutdownBackstop ends the process if a graceful shutdown has not finished
// within grace after ctx ended: every step has a deadline of its own, and
// this holds even if one is missed, so a process told to stop is gone
// within its grace period whatever is down. Its log line names the steps
// still running (running, when given).
func shutdownBackstop(ctx context.Context, grace time.Duration, log *slog.Logger, exit func(int), running func() []string) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			var still []string
			if running != nil {
				still = running()
			}
			log.Error("shutdown did not finish within its grace period; exiting now", "grace", grace, "still_running", still)
			exit(1)
		}
	}()
	return func() { close(done) }
}

// backstopAfter is how long after the shutdown budget the backstop ends a
// process whose shutdown overran: with the budget (4 s by default), a
// server told to stop is gone within 5 s, its exit included.
const backstopAfter = 750 * time.Millisecond

// httpShutdownTimeout bounds the HTTP server's shutdown: requests' contexts
// have ended by then, so it waits only for handlers to notice.
const httpShutdownTimeout = time.Second

// closePool closes a database pool, waiting at most what is left of the
// shutdown budget: pgxpool's Close waits for every connection, and one stuck
// on a Postgres that hangs would hold the process until its timeouts.
func closePool(name string, pool *pgxpool.Pool, budget *startstop.Budget, log *slog.Logger) {
	start := time.Now()
	done := make(chan struct{})
	go func() {
		pool.Close()
		close(done)
	}()
	t := time.NewTimer(budget.Left(time.Second))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		log.Warn("slow to stop: a database pool did not close within the shutdown budget; its connections end with the process",
			"component", name+" database pool", "took", time.Since(start).Round(time.Millisecond))
	}
}

// untilDone runs a start step that takes no context (a migration's
// connection) and returns its error, or ctx's once ctx ends: a server told
// to stop while its database hangs does not wait for the step. The step
// goes on until it returns or the process exits.
func untilDone(ctx context.Context, step func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- step() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// defaultShutdownTimeout is the shutdown budget: the steps' waits add up to
// at most this, so that with the scheduling around them a server told to
// stop is gone within 5 s whatever is down.
const defaultShutdownTimeout = 4 * time.Second

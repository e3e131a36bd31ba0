package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/runtime/startstop"
)

// named is a component with the name its stop is logged under.
type named struct {
	startstop.Service
	name string
	log  *slog.Logger
}

// Stop stops the component and logs how long that took, so an operator
// whose server was slow to stop can see which step held it.
func (n named) Stop() {
	start := time.Now()
	n.Service.Stop()
	took := time.Since(start)
	if took > time.Second {
		n.log.Warn("slow to stop", "component", n.name, "took", took.Round(time.Millisecond))
		return
	}
	n.log.Debug("stopped", "component", n.name, "took", took.Round(time.Millisecond))
}

// nameAll names the components in start order for their stop logs.
func nameAll(log *slog.Logger, svcs []startstop.Service, names ...string) []startstop.Service {
	out := make([]startstop.Service, len(svcs))
	for i, s := range svcs {
		name := "component"
		if i < len(names) {
			name = names[i]
		}
		out[i] = named{Service: s, name: name, log: log}
	}
	return out
}

// shutdownBackstop ends the process if a graceful shutdown has not finished
// within grace after ctx ended: every step has a deadline of its own, and
// this holds even if one is missed, so a process told to stop is gone
// within its grace period whatever is down.
func shutdownBackstop(ctx context.Context, grace time.Duration, log *slog.Logger, exit func(int)) (stop func()) {
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
			log.Error("shutdown did not finish within its grace period; exiting now", "grace", grace)
			exit(1)
		}
	}()
	return func() { close(done) }
}

// httpShutdownTimeout bounds the HTTP server's shutdown: requests' contexts
// have ended by then, so it waits only for handlers to notice.
const httpShutdownTimeout = time.Second

// closePool closes a database pool, waiting at most what is left of the
// shutdown budget: pgxpool's Close waits for every connection, and one stuck
// on a Postgres that hangs would hold the process until its timeouts.
func closePool(pool *pgxpool.Pool, budget *startstop.Budget, log *slog.Logger) {
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
		log.Warn("a database pool did not close within the shutdown budget; its connections end with the process")
	}
}

// defaultShutdownTimeout is the shutdown budget: the steps' waits add up to
// at most this, so that with the scheduling around them a server told to
// stop is gone within 5 s whatever is down.
const defaultShutdownTimeout = 4 * time.Second

// Package startstop is the one lifecycle every long-running piece of kmirror
// follows: Start(ctx) once, Stop() any number of times, a context that only
// Stop cancels, and goroutines that Stop waits for. StartAll starts pieces in
// order and stops the ones already started when one fails; Parallel stops a
// group concurrently.
package startstop

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Service is a long-running piece of an instance.
type Service interface {
	// Start begins the work and returns promptly. ctx supplies values only:
	// the work runs until Stop.
	Start(ctx context.Context) error
	// Stop ends the work and waits for it. It is safe to call more than
	// once, and before or without Start.
	Stop()
}

// Base is embedded by a Service to do the bookkeeping: StartInit at the top
// of Start, Go for each goroutine, StopInit and Halt in Stop.
type Base struct {
	mu      sync.Mutex
	state   int // 0 new, 1 running, 2 stopped
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup
}

// StartInit begins a start. It returns the service's context, which keeps
// ctx's values and ends only when Halt runs, and false when the service was
// started before (or stopped), in which case Start should return an error
// or nothing.
func (b *Base) StartInit(ctx context.Context) (context.Context, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != 0 {
		return nil, false
	}
	b.state = 1
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return b.ctx, true
}

// ErrStarted is returned by a Start called a second time.
var ErrStarted = errors.New("already started")

// Go runs fn on its own goroutine; Halt waits for it.
func (b *Base) Go(fn func(ctx context.Context)) {
	b.mu.Lock()
	ctx := b.ctx
	b.running.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.running.Done()
		fn(ctx)
	}()
}

// StopInit reports whether this call is the one that stops a running
// service; Stop returns at once when it is not.
func (b *Base) StopInit() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != 1 {
		b.state = 2
		return false
	}
	b.state = 2
	return true
}

// StopAndHalt is a Stop's usual start: when this call is the one that stops
// the running service, it cancels the context and waits for the goroutines,
// and reports true; otherwise it does nothing and reports false.
func (b *Base) StopAndHalt() bool {
	if !b.StopInit() {
		return false
	}
	b.Halt()
	return true
}

// Halt cancels the service's context and waits for every goroutine that Go
// started.
func (b *Base) Halt() {
	b.mu.Lock()
	cancel := b.cancel
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	b.running.Wait()
}

// Started reports whether Start ran and Stop has not.
func (b *Base) Started() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == 1
}

// StartAll starts the services in order. When one fails, the ones already
// started are stopped, in reverse order, and its error is returned.
func StartAll(ctx context.Context, svcs ...Service) error {
	for i, s := range svcs {
		if err := s.Start(ctx); err != nil {
			StopAll(svcs[:i]...)
			return fmt.Errorf("start %T: %w", s, err)
		}
	}
	return nil
}

// StopAll stops the services in reverse order, each one after the next has
// finished: the reverse of the order StartAll started them in.
func StopAll(svcs ...Service) {
	for i := len(svcs) - 1; i >= 0; i-- {
		svcs[i].Stop()
	}
}

// StopAllParallel stops the services concurrently and waits for all.
func StopAllParallel(svcs ...Service) {
	var wg sync.WaitGroup
	for _, s := range svcs {
		wg.Go(s.Stop)
	}
	wg.Wait()
}

// Parallel groups services that start in order but stop concurrently, as
// one Service for StartAll and StopAll.
func Parallel(svcs ...Service) Service { return parallel(svcs) }

type parallel []Service

func (p parallel) Start(ctx context.Context) error { return StartAll(ctx, p...) }
func (p parallel) Stop()                           { StopAllParallel(p...) }

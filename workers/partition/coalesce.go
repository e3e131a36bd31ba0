package partition

import (
	"context"
	"sync"
	"time"
)

// coalescer shares reads among the partitions that need the same thing at
// the same time, such as their mirror's row while thousands of them
// prepare at once. It runs at most one read per key at a time; callers
// that arrive while one runs wait for the next, which starts after they
// asked and serves them all. So each caller gets a result at least as
// fresh as its own read would have been, and a burst of callers costs a
// couple of reads instead of one each.
type coalescer[K comparable, V any] struct {
	// timeout bounds each read, which runs apart from any one caller's
	// context (the callers share it).
	timeout time.Duration

	mu      sync.Mutex
	running map[K]*flight[V]
	queued  map[K]*flight[V]
}

type flight[V any] struct {
	done chan struct{} // closed when v and err are set
	v    V
	err  error
}

func newCoalescer[K comparable, V any](timeout time.Duration) *coalescer[K, V] {
	return &coalescer[K, V]{timeout: timeout, running: map[K]*flight[V]{}, queued: map[K]*flight[V]{}}
}

// do returns the result of a read of k that started after the call, or
// ctx's error. read is the key's read; the first caller's is used for
// the callers it serves.
func (c *coalescer[K, V]) do(ctx context.Context, k K, read func(ctx context.Context) (V, error)) (V, error) {
	c.mu.Lock()
	f := c.queued[k]
	if f == nil {
		f = &flight[V]{done: make(chan struct{})}
		c.queued[k] = f
		prev := c.running[k]
		readCtx := context.WithoutCancel(ctx)
		go c.run(k, f, prev, readCtx, read)
	}
	c.mu.Unlock()
	return f.wait(ctx)
}

// join is do for an action, such as creating a topic, rather than a read:
// a caller that arrives while the key's action runs takes its result, since
// what the action did holds for that caller too (a second run would only
// find it done, and say less: not that the topic is new).
func (c *coalescer[K, V]) join(ctx context.Context, k K, act func(ctx context.Context) (V, error)) (V, error) {
	c.mu.Lock()
	f := c.running[k]
	c.mu.Unlock()
	if f == nil {
		return c.do(ctx, k, act)
	}
	return f.wait(ctx)
}

func (f *flight[V]) wait(ctx context.Context) (V, error) {
	select {
	case <-f.done:
		return f.v, f.err
	case <-ctx.Done():
		var zero V
		return zero, context.Cause(ctx)
	}
}

// run waits for the key's running read, then runs f's, which from then on
// takes no more callers.
func (c *coalescer[K, V]) run(k K, f, prev *flight[V], ctx context.Context, read func(ctx context.Context) (V, error)) {
	if prev != nil {
		<-prev.done
	}
	c.mu.Lock()
	delete(c.queued, k)
	c.running[k] = f
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	f.v, f.err = read(ctx)
	cancel()
	c.mu.Lock()
	if c.running[k] == f {
		delete(c.running, k)
	}
	c.mu.Unlock()
	close(f.done)
}

package partition

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// grouped runs requests of one kind in groups: one group at a time, with
// every request made while the previous group ran in the next (up to max).
// Under a burst, each caller waits for about two groups instead of its turn
// behind every other caller. The partitions of a new topic, or thousands
// after a failover, start together and make the same requests at the same
// moment.
//
// A request that finds the runner idle waits linger before its group is
// taken, so that a burst's first request does not run alone: the twelve
// workers of a new topic make each request within about half a
// millisecond of each other, and the first one, served alone, would put its
// partition a statement ahead of the other eleven at every later step, up
// to the fetcher, where kgo waits a moment before loading the metadata of
// partitions added after another.
type grouped[Req, Res any] struct {
	what   string // for the log
	max    int
	linger time.Duration
	// run serves one group: results and errors aligned with reqs.
	run func(reqs []Req) ([]Res, []error)
	log *slog.Logger

	mu      sync.Mutex
	queue   []*groupCall[Req, Res]
	running bool
}

type groupCall[Req, Res any] struct {
	req  Req
	done chan struct{} // closed when res and err are set
	res  Res
	err  error
}

func newGrouped[Req, Res any](what string, max int, linger time.Duration, log *slog.Logger, run func([]Req) ([]Res, []error)) *grouped[Req, Res] {
	return &grouped[Req, Res]{what: what, max: max, linger: linger, run: run, log: log}
}

// do makes one request and waits for its result. It does not take a
// context: run bounds each group itself, and a caller that left early
// would not know whether its request (a write, say) took effect.
func (g *grouped[Req, Res]) do(req Req) (Res, error) {
	c := &groupCall[Req, Res]{req: req, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if !g.running {
		g.running = true
		go g.loop()
	}
	g.mu.Unlock()
	<-c.done
	return c.res, c.err
}

// loop serves what is queued, group by group, until nothing is.
func (g *grouped[Req, Res]) loop() {
	time.Sleep(g.linger)
	for {
		g.mu.Lock()
		n := min(len(g.queue), g.max)
		if n == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		calls := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()
		g.serve(calls)
		for _, c := range calls {
			close(c.done)
		}
	}
}

// serve runs one group. A panic fails the group's requests, not the
// process: the callers are partition workers, whose panics stay their own.
func (g *grouped[Req, Res]) serve(calls []*groupCall[Req, Res]) {
	defer func() {
		if v := recover(); v != nil {
			g.log.Error("panic in grouped "+g.what, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			for _, c := range calls {
				c.err = fmt.Errorf("panic in grouped %s: %v", g.what, v)
			}
		}
	}()
	reqs := make([]Req, len(calls))
	for i, c := range calls {
		reqs[i] = c.req
	}
	res, errs := g.run(reqs)
	for i, c := range calls {
		c.res, c.err = res[i], errs[i]
	}
}

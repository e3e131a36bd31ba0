package partition

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A burst of callers shares reads, and every caller gets a read that
// started after it asked.
func TestCoalescerSharesFreshReads(t *testing.T) {
	c := newCoalescer[string, int64](time.Second)
	var reads, version atomic.Int64
	release := make(chan struct{})
	read := func(context.Context) (int64, error) {
		reads.Add(1)
		v := version.Load() // what the read sees as it starts
		<-release
		return v, nil
	}
	// The first caller's read is running and blocked.
	first := startFirst(t, "read", &reads, func() (int64, error) { return c.do(t.Context(), "k", read) })

	// The value changes; callers that ask now must not get the running
	// read's older value.
	version.Store(1)
	const n = 50
	var wg sync.WaitGroup
	got := make([]int64, n)
	for i := range n {
		wg.Go(func() {
			v, err := c.do(t.Context(), "k", read)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	waitFor(t, "a read queued behind it", func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.queued["k"] != nil, "none queued"
	})
	close(release)
	wg.Wait()
	if v := <-first; v != 0 {
		t.Errorf("first caller got %d, want 0", v)
	}
	for i, v := range got {
		if v != 1 {
			t.Errorf("caller %d got %d, want the value after it asked (1)", i, v)
		}
	}
	// Most joined the read queued behind the first; a straggler may start
	// one more.
	if r := reads.Load(); r < 2 || r > n/2 {
		t.Errorf("%d reads for %d callers, want them shared", r, n+1)
	}
}

// A caller that gives up returns its context's error; the read goes on for
// the others.
func TestCoalescerCallerCancels(t *testing.T) {
	c := newCoalescer[string, int](time.Second)
	release := make(chan struct{})
	read := func(context.Context) (int, error) { <-release; return 7, nil }
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error)
	go func() {
		_, err := c.do(ctx, "k", read)
		errc <- err
	}()
	other := make(chan int)
	go func() {
		v, _ := c.do(t.Context(), "k", read)
		other <- v
	}()
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Errorf("cancelled caller: %v", err)
	}
	close(release)
	if v := <-other; v != 7 {
		t.Errorf("other caller got %d", v)
	}
}

// join shares a running action with the callers that arrive meanwhile
// (do would run it again for them), and a caller after it ends runs anew.
func TestCoalescerJoinSharesRunningAction(t *testing.T) {
	c := newCoalescer[string, int64](time.Second)
	var runs atomic.Int64
	release := make(chan struct{})
	act := func(context.Context) (int64, error) {
		n := runs.Add(1)
		if n == 1 {
			<-release
		}
		return n, nil
	}
	first := startFirst(t, "action", &runs, func() (int64, error) { return c.join(t.Context(), "k", act) })
	const n = 20
	var wg sync.WaitGroup
	got := make([]int64, n)
	waiting := &doneSpy{Context: t.Context()}
	for i := range n {
		wg.Go(func() { got[i], _ = c.join(waiting, "k", act) })
	}
	waitFor(t, "every caller waiting", func() (bool, string) {
		return waiting.waits.Load() == n, fmt.Sprint(waiting.waits.Load(), " waiting")
	})
	close(release)
	wg.Wait()
	if v := <-first; v != 1 {
		t.Errorf("first caller got run %d, want 1", v)
	}
	for i, v := range got {
		if v != 1 {
			t.Errorf("caller %d got run %d, want the running one (1)", i, v)
		}
	}
	if v, _ := c.join(t.Context(), "k", act); v != 2 {
		t.Errorf("a caller after the action ended got run %d, want a new one (2)", v)
	}
}

// startFirst makes the first call in a goroutine and returns once its
// work has started (started counts one); the call's value arrives on the
// channel returned.
func startFirst(t *testing.T, what string, started *atomic.Int64, call func() (int64, error)) <-chan int64 {
	t.Helper()
	first := make(chan int64, 1)
	go func() {
		v, _ := call()
		first <- v
	}()
	waitFor(t, "the first "+what+" running", func() (bool, string) {
		return started.Load() == 1, fmt.Sprint(started.Load(), " started")
	})
	return first
}

// doneSpy counts the callers that have begun to wait on it.
type doneSpy struct {
	context.Context
	waits atomic.Int64
}

func (d *doneSpy) Done() <-chan struct{} {
	d.waits.Add(1)
	return d.Context.Done()
}

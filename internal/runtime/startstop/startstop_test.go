package startstop

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

// recorder is a Service that records its starts and stops.
type recorder struct {
	Base
	name string
	fail bool
	log  *[]string
	mu   *sync.Mutex
}

func (r *recorder) Start(ctx context.Context) error {
	if _, ok := r.StartInit(ctx); !ok {
		return ErrStarted
	}
	if r.fail {
		r.StopInit()
		return errors.New("boom")
	}
	r.Go(func(ctx context.Context) { <-ctx.Done() })
	r.note("start " + r.name)
	return nil
}

func (r *recorder) Stop() {
	if !r.StopAndHalt() {
		return
	}
	r.note("stop " + r.name)
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, s)
}

func newRecorders(names ...string) ([]*recorder, *[]string) {
	log := &[]string{}
	mu := &sync.Mutex{}
	var out []*recorder
	for _, n := range names {
		out = append(out, &recorder{name: n, log: log, mu: mu})
	}
	return out, log
}

func services(rs []*recorder) []Service {
	out := make([]Service, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

func TestStartAllStopAllOrder(t *testing.T) {
	rs, log := newRecorders("a", "b", "c")
	if err := StartAll(context.Background(), services(rs)...); err != nil {
		t.Fatal(err)
	}
	StopAll(services(rs)...)
	StopAll(services(rs)...) // idempotent
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if !slices.Equal(*log, want) {
		t.Fatalf("got %v, want %v", *log, want)
	}
}

func TestStartAllStopsWhatStartedWhenOneFails(t *testing.T) {
	rs, log := newRecorders("a", "b", "c")
	rs[2].fail = true
	err := StartAll(context.Background(), services(rs)...)
	if err == nil {
		t.Fatal("StartAll succeeded with a failing service")
	}
	want := []string{"start a", "start b", "stop b", "stop a"}
	if !slices.Equal(*log, want) {
		t.Fatalf("got %v, want %v", *log, want)
	}
	if rs[0].Started() || rs[1].Started() {
		t.Fatal("a service is still running after the failed start")
	}
}

func TestStartTwiceAndStopBeforeStart(t *testing.T) {
	rs, log := newRecorders("a")
	rs[0].Stop() // before Start: nothing to do
	if err := rs[0].Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("Start after Stop = %v, want ErrStarted", err)
	}
	if len(*log) != 0 {
		t.Fatalf("log %v, want empty", *log)
	}
	rs2, _ := newRecorders("b")
	if err := rs2[0].Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rs2[0].Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start = %v, want ErrStarted", err)
	}
	rs2[0].Stop()
}

func TestParallelStopsConcurrently(t *testing.T) {
	// Each Stop blocks until every Stop has begun: only a concurrent stop
	// can finish.
	var began sync.WaitGroup
	began.Add(2)
	block := func() { began.Done(); began.Wait() }
	p := Parallel(&blockingStop{stop: block}, &blockingStop{stop: block})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.Stop()
}

type blockingStop struct{ stop func() }

func (b *blockingStop) Start(context.Context) error { return nil }
func (b *blockingStop) Stop()                       { b.stop() }

package produce

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceGate: a batch waits until it fits, one larger than the limit
// goes alone, and a wait ends with its context's cause.
func TestProduceGate(t *testing.T) {
	g := NewGate(10)
	ctx := t.Context()
	if err := g.Acquire(ctx, 8); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- g.Acquire(ctx, 5) }()
	select {
	case err := <-got:
		t.Fatalf("8 + 5 records fit a gate of 10 (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.Release(3)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	g.Release(10)
	if err := g.Acquire(ctx, 25); err != nil {
		t.Fatalf("a batch larger than the limit must go when nothing is held: %v", err)
	}
	cause := errors.New("delivery timeout")
	cctx, cancel := context.WithCancelCause(ctx)
	time.AfterFunc(20*time.Millisecond, func() { cancel(cause) })
	if err := g.Acquire(cctx, 1); !errors.Is(err, cause) {
		t.Fatalf("acquire after its context ended: %v, want %v", err, cause)
	}
}

// TestProduceGateWakesEveryWaiter: waiters of different sizes (one fetch
// goroutine per mirror) all get room as it comes back in small runs; none
// is left waiting because another registered a smaller need.
func TestProduceGateWakesEveryWaiter(t *testing.T) {
	g := NewGate(100)
	if err := g.Acquire(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got := make(chan error, 3)
	for _, n := range []int64{60, 30, 10} { // each smaller: need shows it waits
		go func() { got <- g.Acquire(ctx, n) }()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			g.mu.Lock()
			waiting := g.need == n
			g.mu.Unlock()
			if waiting {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the waiter for %d never waited", n)
			}
		}
	}
	for range 10 {
		g.Release(10) // the promise gives room back in runs
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		if err := <-got; err != nil {
			t.Fatalf("a waiter got no room after all of it came back: %v", err)
		}
	}
	if g.held != 100 {
		t.Fatalf("held %d, want 100", g.held)
	}
}

// TestProduceGateKeepsResultsInOrder produces the way a mirroring session
// does, with the engine's producer options: room for a batch from the gate,
// then every record of it, under a context that ends while the buffer is
// full and the destination stalls. Another partition keeps the buffer full.
// The results must come in produce order, as Acks assumes, and the
// destination must hold exactly the verified records, in order.
//
// With kgo's own buffer limit instead of the gate (MaxBufferedRecords(50)),
// the record whose Produce waits for room fails first, ahead of the 50
// records before it, in ten runs of ten; in one of ten runs of a variant
// of this set-up, a later record also lands behind a batch in flight,
// after records that failed: copies skipped and repeated on the
// destination (what TestScenarioSlowDestinationKeepsOrder guards against).
func TestProduceGateKeepsResultsInOrder(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(append(Options(time.Second), kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := range int32(2) { // every request after this may carry several
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Partition: p, Value: []byte("-")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// The 40th produce request from here on stalls the destination for a
	// second; the ones after it take 20 ms each, so requests stay in
	// flight while room frees up.
	var requests atomic.Int64
	stalled := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		switch n := requests.Add(1); {
		case n == 40:
			close(stalled)
			time.Sleep(time.Second)
		case n > 40:
			time.Sleep(20 * time.Millisecond)
		}
		return nil, nil, false
	})
	gate := NewGate(50)
	stopFill := make(chan struct{})
	var filling sync.WaitGroup
	filling.Go(func() {
		for {
			select {
			case <-stopFill:
				return
			default:
			}
			if gate.Acquire(t.Context(), 1) != nil {
				return
			}
			cl.Produce(t.Context(), &kgo.Record{Partition: 1, Value: []byte("fill")}, func(*kgo.Record, error) { gate.Release(1) })
			time.Sleep(time.Millisecond)
		}
	})
	defer func() { close(stopFill); filling.Wait() }()

	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-stalled
		time.Sleep(300 * time.Millisecond)
		cancel()
	}()
	acks := NewAcks(1, gate, nil)
	var next atomic.Int64 // the index the next result must have
	var outOfOrder atomic.Value
	promise := func(r *kgo.Record, err error) {
		i, _ := strconv.ParseInt(string(r.Value), 10, 64)
		if want := next.Add(1) - 1; i != want && outOfOrder.Load() == nil {
			outOfOrder.Store(fmt.Sprintf("result %d is record %d's (err %v)", want, i, err))
		}
		acks.Promise(r, err)
	}
	// Like a session, produce on after the context ends until told to
	// stop: here by the gate, or after a second.
	produced, stopAt := int64(0), time.Time{}
	for {
		if ctx.Err() != nil && stopAt.IsZero() {
			stopAt = time.Now().Add(time.Second)
		} else if !stopAt.IsZero() && time.Now().After(stopAt) {
			break
		}
		const batch = 10
		if gate.Acquire(ctx, batch) != nil {
			break
		}
		acks.producedEnd.Store(1 + produced + batch)
		for range batch {
			cl.Produce(ctx, &kgo.Record{Partition: 0, Value: []byte(strconv.FormatInt(produced, 10))}, promise)
			produced++
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for acks.done.Load() < produced {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d results after 30 s", acks.done.Load(), produced)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := outOfOrder.Load(); v != nil {
		t.Fatalf("results out of produce order: %s", v)
	}

	// The destination holds records 0..verified-1 after the warm-up record,
	// and nothing else.
	verified := acks.verified.Load()
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ends, err := kadm.NewClient(rd).ListEndOffsets(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("t", 0)
	var landed []string
	rctx, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	for int64(len(landed)) < end.Offset && rctx.Err() == nil {
		rd.PollFetches(rctx).EachRecord(func(r *kgo.Record) { landed = append(landed, string(r.Value)) })
	}
	if int64(len(landed)) != 1+verified {
		t.Fatalf("destination holds %d records after the first, %d verified (of %d produced)", len(landed)-1, verified, produced)
	}
	for i, v := range landed[1:] {
		if v != strconv.Itoa(i) {
			t.Fatalf("destination offset %d holds record %s, want %d", i+1, v, i)
		}
	}
	t.Logf("%d produced, %d landed and verified", produced, verified)
}

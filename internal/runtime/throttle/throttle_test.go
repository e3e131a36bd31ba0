package throttle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestNoLimitDoesNotWait(t *testing.T) {
	th := New(0)
	for range 1000 {
		if d, err := th.Wait(context.Background(), nil, 1<<20); d != 0 || err != nil {
			t.Fatalf("waited %v, %v with no limit", d, err)
		}
	}
}

// TestHoldsTheRate: copies one after another go at the rate, the first at
// once. The machine is shared, so lateness gets slack; earliness none.
func TestHoldsTheRate(t *testing.T) {
	const rate, chunk, n = 1 << 20, 64 << 10, 20
	th := New(rate)
	start := time.Now()
	for range n {
		if _, err := th.Wait(context.Background(), nil, chunk); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	// The first copy goes at once, and the rest are paced; at most the
	// credit can be made up for, so nothing goes sooner than that allows.
	want := time.Duration(float64(n-1) * chunk / rate * float64(time.Second))
	if took < want-credit || took > want+500*time.Millisecond {
		t.Fatalf("%d copies of %d bytes at %d B/s took %v, want about %v", n, chunk, rate, took, want)
	}
}

// TestIdleKeepsLittleCredit: after a quiet spell, one copy goes at once
// and the next waits for it, less the credit; the quiet time is not saved
// up for a burst.
func TestIdleKeepsLittleCredit(t *testing.T) {
	th := New(1 << 20)
	ctx := context.Background()
	if _, err := th.Wait(ctx, nil, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the quiet spell under test
	if d, _ := th.Wait(ctx, nil, 512<<10); d > 50*time.Millisecond {
		t.Fatalf("the first copy after a quiet spell waited %v", d)
	}
	// 512 KiB at 1 MiB/s is 500 ms, less 200 ms of credit.
	if d, _ := th.Wait(ctx, nil, 1); d < 250*time.Millisecond {
		t.Fatalf("the copy after 512 KiB at 1 MiB/s waited only %v, want about 300ms", d)
	}
}

// TestFairAcrossWaiters: waiters that keep asking share the rate evenly.
func TestFairAcrossWaiters(t *testing.T) {
	const waiters = 4
	th := New(512 << 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	counts := make([]int, waiters)
	for i := range waiters {
		wg.Go(func() {
			for {
				if _, err := th.Wait(ctx, nil, 16<<10); err != nil {
					return
				}
				counts[i]++
			}
		})
	}
	wg.Wait()
	lo, hi := counts[0], counts[0]
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if hi-lo > 2 || lo < 5 {
		t.Fatalf("copies per waiter %v: not shared evenly", counts)
	}
}

// TestRateChangeReachesWaiters: a waiter paced at a low rate goes as soon
// as the rate is raised enough, or the limit is lifted.
func TestRateChangeReachesWaiters(t *testing.T) {
	for _, to := range []int64{0, 64 << 20} {
		th := New(64 << 10)
		ctx := context.Background()
		if _, err := th.Wait(ctx, nil, 1<<20); err != nil { // 16 s of bytes ahead
			t.Fatal(err)
		}
		waited := make(chan time.Duration)
		go func() {
			d, _ := th.Wait(ctx, nil, 1)
			waited <- d
		}()
		time.Sleep(100 * time.Millisecond) // the waiter is waiting
		th.SetRate(to)
		select {
		case d := <-waited:
			if d > 2*time.Second {
				t.Fatalf("to %d: waited %v", to, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("SetRate(%d) did not release the waiter", to)
		}
	}
}

// TestAbortGivesBack: an ended wait returns at once with why, and its
// bytes do not delay the next copy.
func TestAbortGivesBack(t *testing.T) {
	th := New(64 << 10)
	if _, err := th.Wait(context.Background(), nil, 64<<10); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { time.Sleep(50 * time.Millisecond); close(done) }()
	start := time.Now()
	if _, err := th.Wait(context.Background(), done, 10<<20); !errors.Is(err, ErrDone) {
		t.Fatalf("err %v, want ErrDone", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the ended wait returned after %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := th.Wait(ctx, nil, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	// What is left ahead is the first copy's 64 KiB (1 s at the rate),
	// not the 10 MiB given back.
	start = time.Now()
	if _, err := th.Wait(context.Background(), nil, 1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("waited %v after the aborted waits gave back their bytes", d)
	}
}

// TestFairAcrossFlows: two goroutines hand over copies one at a time, as a
// mirror's fetch loops do, one for a single flow and one for five flows in
// turn. Each flow gets about a sixth of the rate, not the lone flow half
// of it (as arrival order would give: one copy from each goroutine in
// turn).
func TestFairAcrossFlows(t *testing.T) {
	const chunk = 8 << 10
	th := New(1 << 20)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var mu sync.Mutex
	counts := map[string]int{}
	loop := func(flows ...string) {
		for i := 0; ; i++ {
			f := flows[i%len(flows)]
			if _, err := th.WaitFlow(ctx, nil, f, chunk); err != nil {
				return
			}
			mu.Lock()
			counts[f]++
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { loop("a") })
	wg.Go(func() { loop("b1", "b2", "b3", "b4", "b5") })
	wg.Wait()
	lo, hi := counts["a"], counts["a"]
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	t.Logf("copies per flow: %v", counts)
	if len(counts) != 6 || float64(hi) > 1.5*float64(lo) {
		t.Fatalf("copies per flow %v: not shared evenly", counts)
	}
}

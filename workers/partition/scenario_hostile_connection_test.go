package partition_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/testing/tamperproxy"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioHostileSourceConnection: a source broker whose fetch
// answers break at the connection (F5 of issue 45: garbage, a wrong
// correlation id, a truncated, oversized or slow response). kgo refuses
// each and closes the connection; the mirror's partitions on that broker
// stay MIRRORING but say why in describe while the fetcher retries with
// back-off, kmirror's memory stays within 100 MB, another mirror of the
// same cluster copies on, and once the broker answers again the mirror
// catches up and the error clears. The hostile broker is a tamperproxy in
// front of kfake, which mirror m reaches only through it.
func TestScenarioHostileSourceConnection(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fault tamperproxy.Fault
		name  string
		// within is how soon describe must show the error. A slow answer
		// fails only at kgo's read deadline (the max wait plus its 10 s
		// request overhead: a shorter one would cut large answers over
		// slow links), but a request unanswered past its long poll shows
		// as trouble before that (client_health.go, stalls).
		within time.Duration
	}{
		{tamperproxy.Garbage, "garbage", 5 * time.Second},
		{tamperproxy.WrongCorrelation, "wrong correlation id", 5 * time.Second},
		{tamperproxy.Truncated, "truncated", 5 * time.Second},
		{tamperproxy.Oversized, "oversized", 5 * time.Second},
		{tamperproxy.Slow, "slow", 5 * time.Second},
	} {
		// Side by side (go test runs GOMAXPROCS at once): a case's memory
		// figure is the process's, so it bounds what runs beside it too.
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			hostileConnection(t, c.fault, c.within)
		})
	}
}

func hostileConnection(t *testing.T, fault tamperproxy.Fault, within time.Duration) {
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("hostile", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := env.Clusters.Source.CreateTopic("calm", 1, nil); err != nil {
		t.Fatal(err)
	}
	src := workertest.Plain(env.Clusters.SourceAddr())
	for _, p := range []int32{0, 1} {
		workertest.ProduceRecords(t, src, seq("hostile", p, "before", hostileBefore)...)
	}
	workertest.ProduceRecords(t, src, seq("calm", 0, "before", hostileBefore)...)
	var armed atomic.Bool
	proxy := tamperproxy.New(t, env.Clusters.SourceAddr(), func(*kmsg.FetchResponse) tamperproxy.Fault {
		if armed.Load() {
			return fault
		}
		return tamperproxy.Forward
	})
	ends := startHostileMirrors(t, env, proxy.Addr())

	mem := measureMemory(t)
	armed.Store(true)
	start := time.Now()
	for _, p := range []int32{0, 1} {
		workertest.ProduceRecords(t, src, seq("hostile", p, "after", hostileAfter)...)
	}
	workertest.ProduceRecords(t, src, seq("calm", 0, "after", hostileAfter)...)
	for _, p := range []int32{0, 1} {
		row := env.waitPartition("m", "hostile", p, within, "the fetch error in describe", func(r repo.Partition) bool {
			return strings.Contains(r.Error, "fetching from the source has failed")
		})
		if row.State != service.StateMirroring {
			t.Errorf("hostile/%d is %s; a broker that fails requests is retried, MIRRORING", p, row.State)
		}
		if p == 0 {
			t.Logf("describe after %v: %s", time.Since(start).Round(time.Millisecond), row.Error)
		}
	}
	workertest.WaitFor(t, 20*time.Second, "mirror m2 to copy on", func() (bool, string) {
		e := ends()
		return strings.HasSuffix(e, fmt.Sprintf("calm %d", hostileBefore+hostileAfter)), e
	})
	// Retries back off: a handful of fetches in 4 s, not a storm.
	fetches := proxy.Requests(kmsg.Fetch)
	workertest.HoldsFor(t, 4*time.Second, "nothing reaches the destination from the hostile broker", func() (bool, string) {
		e := ends()
		return strings.HasPrefix(e, fmt.Sprintf("hostile %d/%d,", hostileBefore, hostileBefore)), e
	})
	if n := proxy.Requests(kmsg.Fetch) - fetches; n > 20 {
		t.Errorf("%d fetches through the hostile broker in 4 s; retries must back off", n)
	} else {
		t.Logf("%d fetches through the hostile broker in 4 s", n)
	}
	mem.check()

	// The broker heals: the mirror catches up and the error clears.
	armed.Store(false)
	workertest.WaitFor(t, 30*time.Second, "mirror m to catch up", func() (bool, string) {
		e := ends()
		n := hostileBefore + hostileAfter
		return strings.HasPrefix(e, fmt.Sprintf("hostile %d/%d,", n, n)), e
	})
	for _, p := range []int32{0, 1} {
		env.waitPartition("m", "hostile", p, 10*time.Second, "the error cleared", func(r repo.Partition) bool {
			return r.Error == "" && r.State == service.StateMirroring
		})
	}
}

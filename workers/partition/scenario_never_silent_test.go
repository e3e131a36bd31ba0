package partition_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/testing/syncbuf"
	"kmirror/internal/testing/testnet"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// A partition that cannot fetch or produce must not look healthy: its row
// carries the error within troubleBound of the trouble's start, while it
// stays MIRRORING and retries, and the mirror's status counts it.
const troubleBound = 5 * time.Second

// waitAllErroring waits until every partition of the mirror is MIRRORING
// with an error containing want, and the mirror's status counts them all,
// within troubleBound of since.
func (env *engineEnv) waitAllErroring(mirror string, partitions int, since time.Time, want string) {
	env.T.Helper()
	workertest.WaitFor(env.T, time.Until(since.Add(troubleBound)), fmt.Sprintf("every partition to say %q", want), func() (bool, string) {
		var rows []string
		ok := true
		for _, p := range env.Partitions(mirror) {
			rows = append(rows, describePartition(p))
			if p.State != service.StateMirroring || !strings.Contains(p.Error, want) {
				ok = false
			}
		}
		if len(rows) != partitions {
			ok = false
		}
		m, err := env.Svc.GetMirror(context.Background(), mirror)
		if err != nil {
			return false, err.Error()
		}
		if m.Status.Erroring != partitions {
			ok = false
		}
		return ok, fmt.Sprintf("erroring %d: %s", m.Status.Erroring, strings.Join(rows, ", "))
	})
	env.T.Logf("every partition said %q after %s", want, time.Since(since).Round(10*time.Millisecond))
}

// waitAllClear waits until every partition is MIRRORING with no error.
func (env *engineEnv) waitAllClear(mirror string, timeout time.Duration) {
	env.T.Helper()
	workertest.WaitFor(env.T, timeout, "every partition MIRRORING with no error", func() (bool, string) {
		var rows []string
		ok := true
		for _, p := range env.Partitions(mirror) {
			rows = append(rows, describePartition(p))
			if p.State != service.StateMirroring || p.Error != "" {
				ok = false
			}
		}
		return ok, strings.Join(rows, ", ")
	})
}

// noneFailed fails the test if a partition went through FAILED.
func (env *engineEnv) noneFailed(mirror, topic string, partitions int32) {
	env.T.Helper()
	for p := range partitions {
		steps, msgs := env.stateEvents(mirror, topic, p)
		for i, st := range steps {
			if strings.Contains(st, "FAILED") {
				env.T.Errorf("%s/%d: %s", topic, p, msgs[i])
			}
		}
	}
}

// TestScenarioSourceFetchesFailNeverSilent: the source answers every other
// request (metadata, list offsets) but drops the connection of every fetch,
// as a broker answering garbage does. Requests that succeed must not hide
// the fetches that fail: within 5 s every partition says fetching fails,
// the status counts them, and they stay MIRRORING; once fetches are
// answered again they catch up and the error clears.
func TestScenarioSourceFetchesFailNeverSilent(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 2, 20)
	var broken atomic.Bool
	src := env.Clusters.Source
	src.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		if broken.Load() {
			return nil, errors.New("injected: fetch answered with garbage"), true
		}
		return nil, nil, false
	})
	broken.Store(true)
	since := time.Now()
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 20, kgo.NoCompression())
	env.waitAllErroring("m", 2, since, "fetching from the source")
	broken.Store(false)
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 30*time.Second)
	env.waitAllClear("m", 10*time.Second)
	env.noneFailed("m", "orders", 2)
}

// TestScenarioSourceFetchesStallNeverSilent: the source holds every fetch
// unanswered (a stalled broker) while it answers everything else. No
// request fails, so only a fetch outstanding for too long can tell: every
// partition says so within 5 s, and the error clears once fetches are
// answered again.
func TestScenarioSourceFetchesStallNeverSilent(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 2, 20)
	release := make(chan struct{})
	var stalled atomic.Bool
	src := env.Clusters.Source
	src.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		if stalled.Load() {
			src.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	stalled.Store(true)
	since := time.Now()
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 20, kgo.NoCompression())
	env.waitAllErroring("m", 2, since, "fetching from the source")
	stalled.Store(false)
	close(release)
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 30*time.Second)
	env.waitAllClear("m", 15*time.Second)
}

// TestScenarioDestinationOutageNeverSilent: under steady traffic the
// network to the destination drops everything (testnet.Proxy hangs) for
// 10 s. Within 5 s every partition says producing fails, while it keeps
// retrying; when the network is back the destination holds exactly the
// source's records and the errors clear.
func TestScenarioDestinationOutageNeverSilent(t *testing.T) {
	for _, mode := range []struct {
		name string
		cut  testnet.CutMode
	}{{"hang", testnet.Hang}, {"refuse", testnet.Refuse}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			behind, proxy := testnet.BehindProxy(t)
			env := newEngineEnv(t, devcluster.Config{DestinationOpts: []kfake.Opt{behind}})
			const parts = 4
			// The server's delivery timeout, not the tests' 1 s: the
			// partitions must say so before any copy times out.
			var logs syncbuf.Buffer
			logger := slog.New(slog.NewTextHandler(io.MultiWriter(&logs, os.Stderr), &slog.HandlerOptions{Level: slog.LevelInfo}))
			env.startMirroredOpts("orders", parts, 20, workertest.InstanceOpts{DeliveryTimeout: 4 * time.Second, Logger: logger})
			stopTraffic := startTraffic(t, env.Clusters.SourceAddr(), []string{"orders"}, parts)
			proxy().Cut(mode.cut)
			since := time.Now()
			env.waitAllErroring("m", parts, since, "destination")
			time.Sleep(time.Until(since.Add(10 * time.Second))) // the rest of the injected outage
			if err := proxy().Restore(); err != nil {
				t.Fatal(err)
			}
			stopTraffic()
			workertest.WaitEndsEqual(t, env.Env, "orders", parts, 60*time.Second)
			workertest.AssertMirrored(t, env.Env, "orders", parts)
			env.waitAllClear("m", 30*time.Second)
			// The log names the side in trouble: the source was fine.
			if l := linesWith(logs.String(), "source fetches keep failing"); l != "" {
				t.Errorf("a destination outage logged as the source's: %s", l)
			}
			if linesWith(logs.String(), "produces to the destination keep failing") == "" {
				t.Errorf("no log line says produces to the destination fail")
			}
		})
	}
}

// startMirroredOpts is startMirrored with instance options.
func (env *engineEnv) startMirroredOpts(topic string, partitions int32, records int, o workertest.InstanceOpts) *workertest.Instance {
	env.T.Helper()
	if err := env.Clusters.Source.CreateTopic(topic, partitions, nil); err != nil {
		env.T.Fatal(err)
	}
	workertest.Produce(env.T, env.Clusters.SourceAddr(), topic, partitions, records, kgo.NoCompression())
	env.CreateMirror("m", topic)
	in := env.StartInstanceOpts("i1", o)
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitEndsEqual(env.T, env.Env, topic, partitions, 20*time.Second)
	return in
}

// linesWith returns the lines of text that contain s.
func linesWith(text, s string) string {
	var out []string
	for l := range strings.Lines(text) {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// TestScenarioDestinationRefusesNeverSilent: the destination answers every
// produce request, but refuses each partition's batch with an error the
// producer retries (NOT_ENOUGH_REPLICAS). Every request succeeds, so only
// the producer knows: within 5 s every partition says producing fails,
// naming the refusal, while it stays MIRRORING; once the destination takes
// the batches they land once each and the errors clear.
func TestScenarioDestinationRefusesNeverSilent(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirroredOpts("orders", 2, 20, workertest.InstanceOpts{DeliveryTimeout: 4 * time.Second})
	var refusing atomic.Bool
	dst := env.Clusters.Destination
	dst.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		if !refusing.Load() {
			return nil, nil, false
		}
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewProduceResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.NotEnoughReplicas.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	refusing.Store(true)
	since := time.Now()
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 20, kgo.NoCompression())
	env.waitAllErroring("m", 2, since, "NOT_ENOUGH_REPLICAS")
	refusing.Store(false)
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 30*time.Second)
	workertest.AssertMirrored(t, env.Env, "orders", 2)
	env.waitAllClear("m", 15*time.Second)
}

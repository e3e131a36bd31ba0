package heartbeat

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
)

func newCluster(t *testing.T) string {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster.ListenAddrs()[0]
}

// forger is a client that may write the heartbeat topic but holds no key.
func forger(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func forge(t *testing.T, cl *kgo.Client, key string, value []byte) {
	t.Helper()
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Key: []byte(key), Value: value, Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func rejected(h *Heartbeats, reason string) float64 {
	return testutil.ToFloat64(h.metrics.rejected.WithLabelValues(reason))
}

// waitFor polls cond for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
	}
}

// F1 of issue 45: a client that can write the topic wrote
// {"session": MaxInt64} for an instance, and readers, keeping the highest
// session, then ignored the instance's real heartbeats: another instance
// took its leases while it was copying. Now a heartbeat no key of the
// deployment verifies is ignored and counted, and none hides the real one.
func TestForgedHeartbeatsAreIgnoredAndCounted(t *testing.T) {
	addr := newCluster(t)
	reg := prometheus.NewRegistry()
	reader := startWith(t, Config{Destination: kafkaconn.Config{BootstrapServers: []string{addr}},
		DeploymentID: "dep", InstanceID: "reader", ReplicationFactor: 1, ReadInterval: 20 * time.Millisecond,
		Keys: testKeys, KeysReload: 50 * time.Millisecond, Registerer: reg})
	a := start(t, addr, "dep", "a", time.Now)
	if err := a.Beat(t.Context(), 8); err != nil {
		t.Fatal(err)
	}
	f := forger(t, addr)
	real := lastValue(t, addr, "dep/a")
	var hb heartbeat
	if err := json.Unmarshal(real, &hb); err != nil {
		t.Fatal(err)
	}
	moved := hb
	moved.Session = math.MaxInt64 // a real MAC on another session
	movedValue, _ := json.Marshal(moved)
	otherKey := hb
	otherKey.Key = 99 // a key the deployment never had
	otherKeyValue, _ := json.Marshal(otherKey)
	for _, v := range [][]byte{
		[]byte(`{"session": 9223372036854775807}`),
		[]byte(`{"session": 9223372036854775807, "beat": 1, "key": 1, "mac": "AAAA"}`),
		movedValue,
		otherKeyValue,
		[]byte(`not json`),
	} {
		forge(t, f, "dep/a", v)
	}
	forge(t, f, "dep/b", real) // a's MAC under another instance's key
	if err := a.Beat(t.Context(), 8); err != nil {
		t.Fatal(err)
	}

	waitFor(t, "every forged heartbeat counted", func() bool {
		return rejected(reader, "malformed") == 2 && rejected(reader, "bad_mac") == 3 &&
			rejected(reader, "unknown_key") == 1
	})
	s := reader.Spared(time.Minute, 15*time.Second, 5*time.Second)
	if s.All || !slices.Equal(s.Owners, []string{"a"}) || !slices.Equal(s.Sessions, []int64{8}) {
		t.Fatalf("spared %+v, want a's real session 8 alone", s)
	}
}

// lastValue reads the newest heartbeat record of key.
func lastValue(t *testing.T, addr, key string) []byte {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{Topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, Topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(Topic, 0)
	var last []byte
	for next := int64(0); next < end.Offset; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if string(r.Key) == key {
				last = r.Value
			}
		})
	}
	return last
}

// A real heartbeat written again by someone else is no news: the session
// of an instance that stopped beating is not spared past the TTL by it.
func TestReplayedHeartbeatIsNoNews(t *testing.T) {
	addr := newCluster(t)
	c := &clock{now: time.Unix(1_000_000, 0)}
	reader := start(t, addr, "dep", "reader", c.Now)
	a := start(t, addr, "dep", "a", time.Now)
	z := start(t, addr, "dep", "z", time.Now)
	if err := a.Beat(t.Context(), 8); err != nil {
		t.Fatal(err)
	}
	waitSpared(t, reader, "a's session spared", func(s repo.Spared) bool { return slices.Contains(s.Owners, "a") })
	c.advance(16 * time.Second)

	forge(t, forger(t, addr), "dep/a", lastValue(t, addr, "dep/a"))
	if err := z.Beat(t.Context(), 3); err != nil { // read after the replay
		t.Fatal(err)
	}
	s := waitSpared(t, reader, "z's session spared", func(s repo.Spared) bool { return slices.Contains(s.Owners, "z") })
	if slices.Contains(s.Owners, "a") {
		t.Fatalf("spared %+v: a replayed heartbeat made a's session look alive", s)
	}
}

// The soak of issue 45: after the destination came back empty, heartbeats
// were never acknowledged again (the topic was not made again), so the
// next database outage dropped every lease. And a reader must read the new
// topic from its start, not wait for it to pass the old one's end.
func TestHeartbeatsRecoverAfterTheTopicIsMadeAgain(t *testing.T) {
	addr := newCluster(t)
	c := &clock{now: time.Unix(1_000_000, 0)}
	reader := start(t, addr, "dep", "reader", c.Now)
	a := start(t, addr, "dep", "a", time.Now)
	for session := int64(1); session <= 20; session++ { // an end the new topic will not reach
		if err := a.Beat(t.Context(), session); err != nil {
			t.Fatal(err)
		}
	}
	waitSpared(t, reader, "a spared", func(s repo.Spared) bool { return slices.Contains(s.Sessions, 20) })

	adm := kadm.NewClient(forger(t, addr))
	if _, err := adm.DeleteTopic(t.Context(), Topic); err != nil {
		t.Fatal(err)
	}
	c.advance(16 * time.Second)
	waitFor(t, "a heartbeat acknowledged after the topic was deleted", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := a.Beat(ctx, 21)
		return err == nil
	})
	waitSpared(t, reader, "a's heartbeat read from the topic made again", func(s repo.Spared) bool {
		return !s.All && slices.Equal(s.Sessions, []int64{21})
	})
}

// keysSource is a database whose keys a test changes, and which can fail.
type keysSource struct {
	mu   sync.Mutex
	rows []repo.HeartbeatKeyRow
	down bool
}

func (k *keysSource) set(down bool, rows ...repo.HeartbeatKeyRow) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.down, k.rows = down, rows
}

func (k *keysSource) read(context.Context) ([]repo.HeartbeatKeyRow, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.down {
		return nil, context.DeadlineExceeded
	}
	return slices.Clone(k.rows), nil
}

// A rotation: the new key is read before it signs, heartbeats signed by
// either verify, and a reader that has not read the keys lately cannot
// tell who is alive.
func TestHeartbeatKeyRotation(t *testing.T) {
	addr := newCluster(t)
	k1 := repo.HeartbeatKeyRow{ID: 1, Key: []byte("11111111111111111111111111111111"), Signs: true}
	k2 := repo.HeartbeatKeyRow{ID: 2, Key: []byte("22222222222222222222222222222222")}
	keys := &keysSource{}
	keys.set(false, k1)
	c := &clock{now: time.Unix(1_000_000, 0)}
	cfg := func(instance string, now func() time.Time) Config {
		return Config{Destination: kafkaconn.Config{BootstrapServers: []string{addr}}, DeploymentID: "dep",
			InstanceID: instance, ReplicationFactor: 1, ReadInterval: 20 * time.Millisecond, Now: now,
			Keys: keys.read, KeysReload: 20 * time.Millisecond}
	}
	reader := startWith(t, cfg("reader", c.Now))
	a := startWith(t, cfg("a", time.Now))
	if err := a.Beat(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	waitSpared(t, reader, "a's beat under key 1", func(s repo.Spared) bool { return slices.Contains(s.Sessions, 1) })

	keys.set(false, k1, k2) // rotated: key 2 is read, and does not sign yet
	waitFor(t, "the reader knows key 2", func() bool {
		reader.mu.Lock()
		defer reader.mu.Unlock()
		return reader.keys.keys[2] != nil
	})
	if err := a.Beat(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if got := lastValue(t, addr, "dep/a"); !containsKey(got, 1) {
		t.Fatalf("a's heartbeat %s, want it signed by key 1 while key 2 does not sign yet", got)
	}
	k2.Signs = true // a minute later
	keys.set(false, k1, k2)
	waitFor(t, "a signs with key 2", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.keys.signer == 2
	})
	if err := a.Beat(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	if got := lastValue(t, addr, "dep/a"); !json.Valid(got) || !containsKey(got, 2) {
		t.Fatalf("a's heartbeat %s, want it signed by key 2", got)
	}
	waitSpared(t, reader, "a's beat under key 2", func(s repo.Spared) bool { return slices.Contains(s.Sessions, 2) })

	// The database is gone for the reader: once its keys are older than
	// staleReloads reloads, it cannot tell who is alive.
	keys.set(true)
	c.advance(staleReloads*20*time.Millisecond + time.Millisecond)
	if s := reader.Spared(time.Minute, 15*time.Second, 5*time.Second); !s.All {
		t.Fatalf("a reader with stale keys spares %+v, want every session", s)
	}
}

func containsKey(value []byte, key int64) bool {
	var hb heartbeat
	return json.Unmarshal(value, &hb) == nil && hb.Key == key
}

package heartbeat

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
)

// clock is a settable clock shared by the readers of one test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// testKeys is a deployment's one signing key, as the database holds it.
var testKeys = staticKeys(repo.HeartbeatKeyRow{ID: 1, Key: []byte("0123456789abcdef0123456789abcdef"), Signs: true})

func staticKeys(rows ...repo.HeartbeatKeyRow) func(context.Context) ([]repo.HeartbeatKeyRow, error) {
	return func(context.Context) ([]repo.HeartbeatKeyRow, error) { return rows, nil }
}

func start(t *testing.T, addr, deployment, instance string, now func() time.Time) *Heartbeats {
	t.Helper()
	return startWith(t, Config{Destination: kafkaconn.Config{BootstrapServers: []string{addr}},
		DeploymentID: deployment, InstanceID: instance, ReplicationFactor: 1,
		ReadInterval: 20 * time.Millisecond, Now: now, Keys: testKeys})
}

func startWith(t *testing.T, cfg Config) *Heartbeats {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h
}

// waitSpared polls b.Spared until cond holds, for at most 10 s.
func waitSpared(t *testing.T, b *Heartbeats, what string, cond func(repo.Spared) bool) repo.Spared {
	t.Helper()
	var s repo.Spared
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s = b.Spared(time.Minute, 15*time.Second, 5*time.Second); cond(s) {
			return s
		}
	}
	t.Fatalf("no %s within 10s: last %+v", what, s)
	return s
}

// A reader spares every expired session until it has read the heartbeats
// to their end, then only those it saw within the TTL, of its own
// deployment, every session of theirs seen within the TTL; and every one again once it falls
// behind by more than the margin.
func TestSparedFollowsHeartbeats(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	addr := cluster.ListenAddrs()[0]
	c := &clock{now: time.Unix(1_000_000, 0)}

	b := start(t, addr, "dep", "b", c.Now)
	if s := b.Spared(time.Minute, 15*time.Second, 5*time.Second); !s.All || s.Grace != time.Minute {
		t.Fatalf("before reading any heartbeat: %+v, want every session spared for the grace", s)
	}
	// The topic does not exist until the first beat; a reader is not
	// caught up on a topic it cannot list.
	a := start(t, addr, "dep", "a", time.Now)
	other := start(t, addr, "other-deployment", "a", time.Now)
	ctx := t.Context()
	for _, beat := range []struct {
		h       *Heartbeats
		session int64
	}{{a, 7}, {other, 99}, {a, 8}} {
		if err := beat.h.Beat(ctx, beat.session); err != nil {
			t.Fatal(err)
		}
	}
	s := waitSpared(t, b, "a's newest session spared", func(s repo.Spared) bool {
		return !s.All && slices.Contains(s.Sessions, 8)
	})
	slices.Sort(s.Sessions)
	if !slices.Equal(s.Owners, []string{"a", "a"}) || !slices.Equal(s.Sessions, []int64{7, 8}) {
		t.Fatalf("spared %v %v, want a's sessions 7 and 8 (not the other deployment's)", s.Owners, s.Sessions)
	}
	if want := time.Unix(1_000_015, 0); !s.Ends.Equal(want) {
		t.Fatalf("spared until %s, want a TTL after a's heartbeat was seen (%s)", s.Ends, want)
	}

	// Unseen for a TTL: no longer spared, while the reader keeps up.
	c.advance(16 * time.Second)
	waitSpared(t, b, "a's session left to takers after a TTL unseen", func(s repo.Spared) bool {
		return !s.All && len(s.Owners) == 0
	})
	if err := a.Beat(ctx, 8); err != nil {
		t.Fatal(err)
	}
	waitSpared(t, b, "a spared again after a new heartbeat", func(s repo.Spared) bool {
		return !s.All && slices.Equal(s.Owners, []string{"a"}) && slices.Equal(s.Sessions, []int64{8})
	})

	// The reader cannot reach the topic's end: after the margin, it cannot
	// tell who is alive, and spares every session.
	b.Stop()
	c.advance(6 * time.Second)
	if s := b.Spared(time.Minute, 15*time.Second, 5*time.Second); !s.All {
		t.Fatalf("a reader stopped for longer than the margin spares %+v, want every session", s)
	}
}

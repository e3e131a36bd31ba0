package notifier_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"kmirror/internal/runtime/notifier"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

// waitSignal fails the test unless s fires within d.
func waitSignal(t *testing.T, s *notifier.Subscription, d time.Duration, what string) {
	t.Helper()
	select {
	case <-s.C():
	case <-time.After(d):
		t.Fatalf("no signal within %s: %s", d, what)
	}
}

// drain empties a pending signal.
func drain(s *notifier.Subscription) {
	select {
	case <-s.C():
	default:
	}
}

// TestNotifierFansOutAndCatchesUp: a trigger's NOTIFY reaches the
// subscribers of its channel only; a broken connection is re-opened and
// every subscriber is told to catch up.
func TestNotifierFansOutAndCatchesUp(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	n, err := notifier.New(notifier.Config{Listen: repo.Notifications(pool), Channels: repo.Channels, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var pid atomic.Uint32
	notifier.OnConnect(n, func(l notifier.Conn) { pid.Store(l.(*repo.Listener).BackendPID()) })
	desired := n.Subscribe(repo.ChannelDesired)
	outbox := n.Subscribe(repo.ChannelOutbox)
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	select {
	case <-n.Listening():
	case <-time.After(10 * time.Second):
		t.Fatal("notifier never listened")
	}
	waitSignal(t, desired, 5*time.Second, "catch-up after the first connect")
	drain(outbox)

	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('m', 't', 'mirroring')`); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, desired, 5*time.Second, "NOTIFY kmirror_desired after a mirror topic insert")
	select {
	case <-outbox.C():
		t.Fatal("an outbox subscriber was woken by a desired-state change")
	case <-time.After(200 * time.Millisecond):
	}

	// Break the connection: the notifier reconnects and says "catch up".
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid.Load()); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, outbox, 10*time.Second, "catch-up after a reconnect")
	select {
	case <-n.Listening():
	case <-time.After(10 * time.Second):
		t.Fatal("notifier did not listen again")
	}
	drain(desired)
	if _, err := pool.Exec(ctx, `UPDATE mirror_topics SET desired_state = 'paused'`); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, desired, 5*time.Second, "NOTIFY after the reconnect")

	desired.Unsubscribe()
	drain(desired)
	if _, err := pool.Exec(ctx, `UPDATE mirror_topics SET desired_state = 'mirroring'`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-desired.C():
		t.Fatal("signal after Unsubscribe")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestNilNotifierNeverFires(t *testing.T) {
	var n *notifier.Notifier
	s := n.Subscribe(repo.ChannelDesired)
	if s.C() != nil {
		t.Fatal("a nil notifier's subscription has a channel")
	}
	s.Unsubscribe()
}

package migrations_test

import (
	"context"
	"testing"
	"time"

	"kmirror/internal/testing/testdb"
)

// TestEventRowsNotifyNobody: migration 000011 dropped the per-row NOTIFY on
// events that nothing listened to; an event insert queues no notification.
func TestEventRowsNotifyNobody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN kmirror_events`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, `UNLISTEN *`)
	var triggers int
	// Only those that fill in the mirror's incarnation (000013) and the
	// destination topic (000024).
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = 'events'::regclass AND NOT tgisinternal
		AND tgname NOT IN ('events_mirror_incarnation', 'events_destination_topic')`).Scan(&triggers); err != nil {
		t.Fatal(err)
	}
	if triggers != 0 {
		t.Fatalf("events has %d triggers, want none", triggers)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO events (kind, message) VALUES ('test', 'x')`); err != nil {
		t.Fatal(err)
	}
	// Notifications of committed transactions reach a listener within
	// milliseconds; a bounded wait shows none was queued.
	wait := func() error {
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := conn.Conn().WaitForNotification(wctx)
		return err
	}
	if err := wait(); err == nil {
		t.Fatal("an event insert notified kmirror_events")
	}
	// The control: a notification on the channel does arrive.
	if _, err := pool.Exec(ctx, `NOTIFY kmirror_events`); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatalf("a NOTIFY on kmirror_events did not reach the listener: %v", err)
	}
}

package service_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/internal/testing/testdb"
	"kmirror/internal/testing/testnet"
	"kmirror/service"
)

// TestParseWait: a Go duration from 0 to 5m; anything else names the field.
func TestParseWait(t *testing.T) {
	for raw, want := range map[string]time.Duration{"0s": 0, "250ms": 250 * time.Millisecond, "2m": 2 * time.Minute, "5m": 5 * time.Minute} {
		if got, err := service.ParseWait("wait", raw); err != nil || got != want {
			t.Errorf("ParseWait(%q) = %s, %v; want %s", raw, got, err, want)
		}
	}
	for _, raw := range []string{"", "soon", "30", "-1s", "5m0.001s", "1h"} {
		_, err := service.ParseWait("wait", raw)
		var v *service.ValidationError
		if !errors.As(err, &v) || len(v.Fields) != 1 || v.Fields[0].Field != "wait" {
			t.Errorf("ParseWait(%q): %v, want a validation error naming wait", raw, err)
		}
	}
}

// TestWaitForTopicsHonoursContext: a waiter whose client went away (its
// context ended) stops at once with the states it last read, and a wake-up
// re-reads them.
func TestWaitForTopicsHonoursContext(t *testing.T) {
	t.Parallel()
	svc, pool := newServiceWithMirror(t)
	ctx := t.Context()
	res, err := svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	got, err := svc.WaitForTopicsWoken(gone, res, time.Minute, nil)
	if took := time.Since(start); err != nil || took > 5*time.Second || got.Completed ||
		len(got.Topics) != 1 || got.Topics[0] != (service.TopicWait{Topic: "orders", DestinationTopic: "orders", Target: service.StateMirroring, Total: 3}) {
		t.Fatalf("after the context ended: %+v, %v after %s", got, err, took)
	}

	// A wake-up (as the notifier sends on a state change) re-reads at once,
	// long before the poll.
	wake := make(chan struct{}, 1)
	done := make(chan service.WaitResult, 1)
	go func() {
		r, err := svc.WaitForTopicsWoken(ctx, res, time.Minute, wake)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := pool.Exec(ctx, `UPDATE mirror_partitions SET state = 'MIRRORING' WHERE mirror = 'm1'`); err != nil {
		t.Fatal(err)
	}
	wake <- struct{}{}
	select {
	case r := <-done:
		if !r.Completed || r.Topics[0].Ready != 3 {
			t.Fatalf("after the wake-up: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end after every partition was MIRRORING")
	}
}

// TestWaitZeroReadsOnce: ?wait=0s answers with the states at the call, even
// with a wake-up pending: it must not wait for a re-read that could already
// hold the target states (the console's "wait ran out" answer depends on it).
func TestWaitZeroReadsOnce(t *testing.T) {
	t.Parallel()
	svc, _ := newServiceWithMirror(t)
	ctx := t.Context()
	res, err := svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // the select's choice was random: try it many times
		wake := make(chan struct{}, 1)
		wake <- struct{}{}
		got, err := svc.WaitForTopicsWoken(ctx, res, 0, wake)
		if err != nil || got.Completed || got.Topics[0].Ready != 0 || got.Waited >= 50*time.Millisecond {
			t.Fatalf("?wait=0s with a wake-up pending: %+v, %v", got, err)
		}
	}
}

// TestWaitForTopicsRidesAnOutage: a wait whose database goes away (an
// outage, a failover) goes on with the states it last read, and completes
// once the database is back and the partitions reach the target.
func TestWaitForTopicsRidesAnOutage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := testdb.New(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testnet.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	pool, err := pgxpool.New(ctx, u.String()+"&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	direct, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	kafka, err := kfake.NewCluster(kfake.SeedTopics(3, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(2 * time.Second),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: "m1",
		Source: service.SourceInput{BootstrapServers: strings.Join(kafka.ListenAddrs(), ",")}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	res, err := svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: "orders"})
	if err != nil {
		t.Fatal(err)
	}

	done := make(chan service.WaitResult, 1)
	errs := make(chan error, 1)
	go func() {
		r, err := svc.WaitForTopicsWoken(ctx, res, time.Minute, nil)
		done <- r
		errs <- err
	}()
	time.Sleep(300 * time.Millisecond) // past the wait's first read
	proxy.Cut(testnet.Refuse)
	// The partitions settle while the waiter cannot see the database.
	if _, err := direct.Exec(ctx, `UPDATE mirror_partitions SET state = 'MIRRORING' WHERE mirror = 'm1'`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the outage: the wait's polls fail meanwhile
	select {
	case r := <-done:
		t.Fatalf("the wait ended during the outage: %+v, %v", r, <-errs)
	default:
	}
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if err := <-errs; err != nil || !r.Completed || r.Topics[0].Ready != 3 {
			t.Fatalf("after the database came back: %+v, %v", r, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not complete within 10 s of the database coming back")
	}
}

// TestRemoveWaitGoesOnPastFailed: a remove takes FAILED partitions to
// STOPPED too (FAILED → PREPARING → STOPPING → STOPPED), so its wait does
// not end at FAILED as the other actions' do: it goes on until they are
// STOPPED, or runs out with completed false.
func TestRemoveWaitGoesOnPastFailed(t *testing.T) {
	t.Parallel()
	svc, pool := newServiceWithMirror(t)
	ctx := t.Context()
	if _, err := svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	setStates := func(state string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE mirror_partitions SET state = $1 WHERE mirror = 'm1'`, state); err != nil {
			t.Fatal(err)
		}
	}
	setStates("FAILED")
	res, err := svc.RemoveTopics(ctx, "m1", "orders")
	if err != nil {
		t.Fatal(err)
	}
	const short = 600 * time.Millisecond
	got, err := svc.WaitForTopicsWoken(ctx, res, short, nil)
	want := service.TopicWait{Topic: "orders", DestinationTopic: "orders", Target: service.StateStopped, Failed: 3, Total: 3}
	if err != nil || got.Completed || got.Waited < short || len(got.Topics) != 1 || got.Topics[0] != want {
		t.Fatalf("remove's wait on FAILED partitions: %+v, %v; want %+v after the whole %s", got, err, want, short)
	}

	wake := make(chan struct{}, 1)
	done := make(chan service.WaitResult, 1)
	go func() {
		r, err := svc.WaitForTopicsWoken(ctx, res, time.Minute, wake)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	setStates("STOPPED")
	wake <- struct{}{}
	select {
	case r := <-done:
		if !r.Completed || r.Topics[0].Ready != 3 || r.Topics[0].Failed != 0 {
			t.Fatalf("after the partitions went STOPPED: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the remove's wait did not end after every partition was STOPPED")
	}
}

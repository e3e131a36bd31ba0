package devcluster

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestDemoTraffic(t *testing.T) {
	baseline := runtime.NumGoroutine()
	c, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	closing := false
	t.Cleanup(func() {
		if !closing {
			c.Close()
		}
	})
	if c.SourceAddr() == c.DestinationAddr() {
		t.Fatalf("source and destination share %s", c.SourceAddr())
	}

	topics := map[string]int32{"orders": 3, "payments": 2}
	if err := c.StartDemo(t.Context(), Demo{Topics: topics, RecordsPerSecond: 50, Group: "demo-consumers"}); err != nil {
		t.Fatal(err)
	}

	waitForTraffic(t, c.SourceAddr(), topics, "demo-consumers")
	checkDemoRecord(t, c.SourceAddr())

	closing = true
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung")
	}
	c.Close() // idempotent
	if err := c.StartDemo(t.Context(), Demo{}); err == nil {
		t.Error("StartDemo after Close succeeded")
	}

	// Every client and broker goroutine ends; the test's clients are closed
	// already.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, baseline %d:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitForTraffic polls until every topic has records and the group has
// committed offsets in it.
func waitForTraffic(t *testing.T, addr string, topics map[string]int32, group string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	defer adm.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		ends, endErr := adm.ListEndOffsets(ctx, slices.Collect(maps.Keys(topics))...)
		commits, commitErr := adm.FetchOffsets(ctx, group)
		ready := endErr == nil && commitErr == nil
		for topic, n := range topics {
			var produced, committed int64
			for p := range n {
				o, _ := ends.Lookup(topic, p)
				produced += o.Offset
				if oc, ok := commits.Lookup(topic, p); ok {
					committed += oc.At
				}
			}
			ready = ready && produced > 0 && committed > 0
		}
		if ready {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no records and commits in every topic: ends=%v (%v) commits=%v (%v)", ends, endErr, commits, commitErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkDemoRecord reads the first order and checks it is the keyed JSON with
// headers the demo promises.
func checkDemoRecord(t *testing.T, addr string) {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	fetches := cl.PollRecords(ctx, 1)
	if errs := fetches.Errors(); len(errs) > 0 {
		t.Fatalf("fetch orders: %v", errs)
	}
	recs := fetches.Records()
	if len(recs) == 0 {
		t.Fatal("no order record")
	}
	r := recs[0]
	var v struct {
		OrderID int64 `json:"order_id"`
	}
	if err := json.Unmarshal(r.Value, &v); err != nil {
		t.Fatalf("order value %q: %v", r.Value, err)
	}
	if strconv.FormatInt(v.OrderID, 10) != string(r.Key) {
		t.Errorf("order_id %d, key %q", v.OrderID, r.Key)
	}
	if len(r.Headers) < 2 || r.Headers[0].Key != "content-type" {
		t.Errorf("headers %v", r.Headers)
	}
}

func TestStartPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	_, err = Start(Config{DestinationPort: port})
	if err == nil || !strings.Contains(err.Error(), "destination cluster on 127.0.0.1:"+strconv.Itoa(port)) {
		t.Fatalf("got %v, want an error naming the destination port %d", err, port)
	}
}

func TestDemoStopsWithContext(t *testing.T) {
	c, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	if err := c.StartDemo(ctx, Demo{RecordsPerSecond: 100}); err != nil {
		t.Fatal(err)
	}
	cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("demo goroutines still running after ctx was canceled")
	}
	c.Close()
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

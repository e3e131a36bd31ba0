package service_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
	"kmirror/repo"
	"kmirror/service"
)

// TestAddTenThousandTopicsIsBounded: one add that matches 10,000 source
// topics (names of 240+ characters) completes within the API's request
// deadline (its context's; the time is logged, not asserted, since a timed
// test on a loaded machine is a flaky one) and allocates a bounded amount, and its event message lists 20
// names, not 10,000. A pattern built to be slow is refused: too large to
// compile, or out of its matching budget, well inside the deadline.
func TestAddTenThousandTopicsIsBounded(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	source := make(map[string]int32, 10_000)
	for i := range 10_000 {
		source[fmt.Sprintf("%s-%05d", strings.Repeat("t", 240), i)] = 1
	}
	catalog := service.CatalogFunc(func(context.Context, kafkaconn.Config) (map[string]int32, error) {
		return source, nil
	})
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: "m", Source: service.SourceInput{BootstrapServers: "h:1"}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ name, pattern, want string }{
		{"nested repetition", `(.*){1000}`, "took more than"},
		{"repeat count", `((t{100}){100})`, "invalid repeat count"},
		{"huge program", strings.Repeat(`(?:a|b|c|d|e|f|g|h|i|j)*`, 500), "bytes, more than"},
		{"big program", strings.Repeat(`[a-z]{1,1000}`, 11), "instructions, more than"},
	} {
		start := time.Now()
		_, err := svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: c.pattern})
		var verr *service.ValidationError
		if !errors.As(err, &verr) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a validation error saying %q", c.name, err, c.want)
		}
		// The budget is 2s; the API's request deadline is 35s.
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: refused after %s", c.name, d)
		}
		t.Logf("%s: refused in %s: %v", c.name, time.Since(start).Round(time.Millisecond), err)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// Under the API's request deadline (35s), as the request would run.
	reqCtx, cancel := context.WithTimeout(ctx, 35*time.Second)
	defer cancel()
	start := time.Now()
	res, err := svc.AddTopics(reqCtx, "m", service.AddTopicsInput{Topic: `t+-\d+`})
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil || len(res.Topics) != 10_000 {
		t.Fatalf("add: %d topics, %v", len(res.Topics), err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("added 10,000 topics in %s, %d MiB allocated", elapsed.Round(time.Millisecond), alloc>>20)
	if alloc > 512<<20 {
		t.Errorf("adding 10,000 topics allocated %d MiB", alloc>>20)
	}
	events, err := repo.EventsList(ctx, pool, repo.EventsListParams{Mirror: "m"})
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	if len(last.Message) > 8<<10 || !strings.Contains(last.Message, "and 9980 more") {
		t.Fatalf("event message of %d bytes: %.200s", len(last.Message), last.Message)
	}
	// Pausing them all matches the mirror's own 10,000 topics.
	start = time.Now()
	if res, err := svc.PauseTopics(ctx, "m", `.*`); err != nil || len(res.Topics) != 10_000 {
		t.Fatalf("pause: %d, %v", len(res.Topics), err)
	}
	t.Logf("paused 10,000 topics in %s", time.Since(start).Round(time.Millisecond))
}

package api_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"kmirror/api"
)

// fillPartitions gives mirror m n describe rows of stopped topics.
func fillPartitions(t *testing.T, e *env, n int) {
	t.Helper()
	for _, sql := range []string{
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', '` + unreachable + `')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('m', 't', 'stopped')`,
		fmt.Sprintf(`INSERT INTO mirror_partitions (mirror, topic, partition, state)
			SELECT 'm', 't', p, 'STOPPED' FROM generate_series(0, %d) p`, n-1),
	} {
		if _, err := e.pool.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDescribeBudgetWaitsThenServes: past its burst, a page waits for the
// instance's describe budget and is then served, and the wait is counted.
func TestDescribeBudgetWaitsThenServes(t *testing.T) {
	t.Parallel()
	// 5,000 rows at once, then 2,000 a second. The second page reserves
	// 5,000 rows (its limit) and so waits about 2.5 s less the time the
	// first page took: far more than a slow first page on a busy machine
	// takes (166 ms in one CI run), so the bucket cannot refill before the
	// second asks.
	e := newEnvWith(t, envOpts{describeRate: 2000, describeBurst: 5000, public: true})
	fillPartitions(t, e, 6000)
	var page api.PartitionList
	ok(t, e.do(t, "GET", "/v1/partitions?limit=5000", nil), 200, &page)
	if len(page.Partitions) != 5000 || page.NextCursor == "" {
		t.Fatalf("first page: %d rows, cursor %q", len(page.Partitions), page.NextCursor)
	}
	ok(t, e.do(t, "GET", "/v1/partitions?limit=5000&cursor="+page.NextCursor, nil), 200, &page)
	if len(page.Partitions) != 1000 {
		t.Fatalf("second page: %d rows, want 1000", len(page.Partitions))
	}
	m := regexp.MustCompile(`(?m)^kmirror_api_describe_wait_seconds_total ([0-9.e+-]+)$`).FindSubmatch(e.do(t, "GET", "/metrics", nil).body)
	if m == nil {
		t.Fatal("no kmirror_api_describe_wait_seconds_total in /metrics")
	}
	if waited, err := strconv.ParseFloat(string(m[1]), 64); err != nil || waited <= 0 {
		t.Fatalf("kmirror_api_describe_wait_seconds_total %s, want > 0 after a page waited", m[1])
	}
}

// TestDescribeBudgetTooLongIs429: a page that could not be served before
// its request's deadline is 429 with Retry-After at once; a filtered page
// gives back the rows it did not use.
func TestDescribeBudgetTooLongIs429(t *testing.T) {
	t.Parallel()
	// One row a second after 5,000: once they are spent, any page waits
	// longer than the 2 s deadline.
	e := newEnvWith(t, envOpts{describeRate: 1, describeBurst: 5000, requestTimeout: 2 * time.Second})
	fillPartitions(t, e, 5000)
	// A page matching nothing reserves 5,000 rows and gives them all back.
	var page api.PartitionList
	ok(t, e.do(t, "GET", "/v1/partitions?limit=5000&state=FAILED", nil), 200, &page)
	if len(page.Partitions) != 0 {
		t.Fatalf("state=FAILED: %d rows", len(page.Partitions))
	}
	ok(t, e.do(t, "GET", "/v1/partitions?limit=5000", nil), 200, &page)
	if len(page.Partitions) != 5000 {
		t.Fatalf("full page: %d rows, want 5000", len(page.Partitions))
	}
	start := time.Now()
	r := e.do(t, "GET", "/v1/partitions?limit=1000", nil)
	p := wantProblem(t, r, 429, "rate-limited", "describe budget")
	if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 {
		t.Fatalf("Retry-After %q, want whole seconds (%+v)", r.header.Get("Retry-After"), p)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the 429 came after %s: it should not wait for a budget it cannot get", took)
	}
}

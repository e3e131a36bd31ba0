package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"kmirror/api"
)

// TestHistoryEndpoint: GET /v1/history serves one total per mirror, and
// with ?mirror the mirror's total then its topics; an unknown mirror is a
// 404 problem.
func TestHistoryEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{historyInterval: 50 * time.Millisecond})
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders|payments")
	e.createMirror(t, "m2")
	if _, err := e.pool.Exec(t.Context(), `UPDATE mirror_partitions SET src_next = 4, dst_next = 4, source_end_offset = 6
		WHERE mirror = 'm1' AND topic = 'orders'`); err != nil {
		t.Fatal(err)
	}

	// Wait for a sample that saw the offsets.
	var h api.History
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok(t, e.do(t, "GET", "/v1/history?mirror=m1", nil), http.StatusOK, &h)
		if len(h.Series) == 3 && len(h.Series[1].Points) > 0 && h.Series[1].Points[len(h.Series[1].Points)-1].Lag == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history never showed orders' lag: %+v", h)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h.IntervalSeconds != 0.05 || h.WindowSeconds != 600 {
		t.Fatalf("interval %v window %v, want 0.05 and 600", h.IntervalSeconds, h.WindowSeconds)
	}
	if s := h.Series; s[0].Mirror != "m1" || s[0].Topic != "" || s[1].Topic != "orders" || s[2].Topic != "payments" {
		t.Fatalf("series: %+v", s)
	}
	total := h.Series[0].Points
	if p := total[len(total)-1]; p.Lag != 6 || p.At.IsZero() || p.RecordsPerSec < 0 {
		t.Fatalf("last total point %+v", p)
	}

	// A total carries no topic at all, not an empty one.
	r := e.do(t, "GET", "/v1/history", nil)
	var raw struct {
		Series []map[string]json.RawMessage `json:"series"`
	}
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Series) != 2 {
		t.Fatalf("totals: %s", r.body)
	}
	for i, want := range []string{`"m1"`, `"m2"`} {
		if _, has := raw.Series[i]["topic"]; has || string(raw.Series[i]["mirror"]) != want {
			t.Fatalf("total %d: %s", i, r.body)
		}
	}

	// A mirror with no topics has its total only.
	ok(t, e.do(t, "GET", "/v1/history?mirror=m2", nil), http.StatusOK, &h)
	if len(h.Series) != 1 || h.Series[0].Mirror != "m2" || h.Series[0].Points == nil {
		t.Fatalf("m2: %+v", h)
	}
	wantProblem(t, e.do(t, "GET", "/v1/history?mirror=nope", nil), http.StatusNotFound, "not-found", "mirror nope does not exist")

	// The rates are on the mirror and topic views.
	r = e.do(t, "GET", "/v1/mirrors/m1/topics/orders", nil)
	if !strings.Contains(string(r.body), `"records_per_sec":`) {
		t.Fatalf("topic without records_per_sec: %s", r.body)
	}
}

// TestHistoryWithoutSampler: a handler with no History answers an empty
// history, and still tells an unknown mirror.
func TestHistoryWithoutSampler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	var h api.History
	ok(t, e.do(t, "GET", "/v1/history", nil), http.StatusOK, &h)
	if h.Series == nil || len(h.Series) != 0 || h.IntervalSeconds != 5 {
		t.Fatalf("history %+v", h)
	}
	ok(t, e.do(t, "GET", "/v1/history?mirror=m1", nil), http.StatusOK, &h)
	if len(h.Series) != 1 || h.Series[0].Mirror != "m1" || len(h.Series[0].Points) != 0 {
		t.Fatalf("history of m1 %+v", h)
	}
	wantProblem(t, e.do(t, "GET", "/v1/history?mirror=nope", nil), http.StatusNotFound, "not-found")
}

package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicActionsWait: with real workers, each topic action's ?wait
// returns once every partition reached the action's target state (add and
// resume MIRRORING, pause PAUSED, remove STOPPED), and says so.
func TestTopicActionsWait(t *testing.T) {
	base, clusters := startInProcess(t, slog.New(slog.DiscardHandler))
	c := apiClient{tb: t, base: base, http: &http.Client{Timeout: 90 * time.Second}}
	c.post("/v1/mirrors", fmt.Sprintf(`{"name":"m","source":{"bootstrap_servers":%q}}`, clusters.SourceAddr()))
	for _, step := range []struct{ action, target string }{
		{"add", "MIRRORING"}, {"pause", "PAUSED"}, {"resume", "MIRRORING"}, {"remove", "STOPPED"},
	} {
		start := time.Now()
		status, body := c.do("POST", "/v1/mirrors/m/topics:"+step.action+"?wait=60s", `{"topic":"bench"}`)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", step.action, status, body)
		}
		var res struct {
			Wait struct {
				Completed bool  `json:"completed"`
				WaitedMs  int64 `json:"waited_ms"`
				Topics    []struct {
					Topic       string `json:"topic"`
					TargetState string `json:"target_state"`
					Ready       int    `json:"ready"`
					Total       int    `json:"total"`
				} `json:"topics"`
			} `json:"wait"`
		}
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatal(err)
		}
		w := res.Wait
		if !w.Completed || len(w.Topics) != 1 || w.Topics[0].Topic != "bench" || w.Topics[0].TargetState != step.target ||
			w.Topics[0].Ready != 3 || w.Topics[0].Total != 3 {
			t.Fatalf("%s: wait %s, want completed with 3/3 %s", step.action, body, step.target)
		}
		if states := c.states(); len(states) != 3 || slices.ContainsFunc(states, func(s string) bool { return s != step.target }) {
			t.Fatalf("%s: partitions %v after the wait, want all %s", step.action, states, step.target)
		}
		t.Logf("%s: %s after %s (server waited %dms)", step.action, step.target, time.Since(start).Round(time.Millisecond), w.WaitedMs)
	}
}

// TestDescribeAfterWait: describe right after a completed ?wait shows the
// offsets the partitions reached the target state with, never "-": the
// change to MIRRORING stores the ends alignment found with its checkpoint,
// so the destination end and the lag add up to the source's end (offsets
// match here: both sides start at zero). Lag then reads 0 once the backlog
// is copied.
func TestDescribeAfterWait(t *testing.T) {
	base, clusters := startInProcess(t, slog.New(slog.DiscardHandler))
	c := apiClient{tb: t, base: base, http: &http.Client{Timeout: 90 * time.Second}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(clusters.SourceAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := range 30 {
		rs = append(rs, &kgo.Record{Topic: "bench", Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	const end = 10 // each partition's source end
	type row struct {
		Partition         int32  `json:"partition"`
		State             string `json:"state"`
		SourceOffset      *int64 `json:"source_offset"`
		DestinationOffset *int64 `json:"destination_offset"`
		Lag               *int64 `json:"lag"`
	}
	describe := func() []row {
		t.Helper()
		status, body := c.do("GET", "/v1/partitions?mirror=m&topic=bench", "")
		if status != http.StatusOK {
			t.Fatalf("describe: %d %s", status, body)
		}
		var d struct{ Partitions []row }
		if err := json.Unmarshal(body, &d); err != nil {
			t.Fatal(err)
		}
		return d.Partitions
	}
	show := func(rows []row) string {
		var b strings.Builder
		for _, r := range rows {
			fmt.Fprintf(&b, "\n%d %s source %s destination %s lag %s", r.Partition, r.State,
				offsetOrDash(r.SourceOffset), offsetOrDash(r.DestinationOffset), offsetOrDash(r.Lag))
		}
		return b.String()
	}
	c.post("/v1/mirrors", fmt.Sprintf(`{"name":"m","source":{"bootstrap_servers":%q}}`, clusters.SourceAddr()))
	for _, action := range []string{"add", "pause", "resume"} {
		if status, body := c.do("POST", "/v1/mirrors/m/topics:"+action+"?wait=60s", `{"topic":"bench"}`); status != http.StatusOK ||
			!strings.Contains(string(body), `"completed":true`) {
			t.Fatalf("%s: %d %s", action, status, body)
		}
		rows := describe()
		for _, r := range rows {
			if len(rows) != 3 || r.SourceOffset == nil || r.DestinationOffset == nil || r.Lag == nil ||
				*r.SourceOffset != end || *r.DestinationOffset+*r.Lag != end || (action == "pause" && *r.Lag != 0) {
				t.Fatalf("describe right after %s?wait:%s\nwant source %d, destination + lag = %d", action, show(rows), end, end)
			}
		}
		t.Logf("describe right after %s?wait:%s", action, show(rows))
	}
	start := time.Now()
	for deadline := start.Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rows := describe()
		if !slices.ContainsFunc(rows, func(r row) bool { return r.Lag == nil || *r.Lag != 0 }) {
			t.Logf("lag 0 after %s", time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lag not 0 after 30s:%s", show(rows))
		}
	}
}

func offsetOrDash(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"
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

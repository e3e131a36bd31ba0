package partition_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestMirroredMetrics: verified copies are counted per mirror and topic, in
// records and in key+value bytes, and stamp the time of the last one.
func TestMirroredMetrics(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	srcConn := workertest.Plain(env.Clusters.SourceAddr())
	recs := append(seq("orders", 0, "a", 30), seq("orders", 1, "b", 12)...)
	wantBytes := 0
	for _, r := range recs {
		wantBytes += len(r.Key) + len(r.Value)
	}
	workertest.ProduceRecords(t, srcConn, recs...)
	reg := prometheus.NewRegistry()
	start := time.Now()
	env.CreateMirror("m", "orders")
	env.StartInstanceOpts("i1", workertest.InstanceOpts{Registerer: reg})
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 20*time.Second)

	// Every record counted, and a checkpoint saved: that is about once a
	// second, so it may come after the last record is counted.
	counted := func() bool {
		mfs, _ := reg.Gather()
		var records float64
		var saves uint64
		for _, mf := range mfs {
			switch mf.GetName() {
			case "kmirror_mirrored_records_total":
				records = mf.GetMetric()[0].GetCounter().GetValue()
			case "kmirror_checkpoint_save_duration_seconds":
				saves = mf.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		return records >= float64(len(recs)) && saves > 0
	}
	deadline := time.Now().Add(10 * time.Second)
	for !counted() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	values := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		seen[mf.GetName()] = true
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "kmirror_checkpoint_save_duration_seconds", "kmirror_produce_request_duration_seconds", "kmirror_fetch_request_duration_seconds":
				if m.GetHistogram().GetSampleCount() == 0 {
					t.Errorf("%s: nothing observed", mf.GetName())
				}
				continue
			}
			if mf.GetName() == "kmirror_copied_batches_total" {
				// Copying batches: each was produced whole.
				if labels["mirror"] != "m" || labels["topic"] != "orders" || labels["how"] != "whole" || len(labels) != 3 {
					t.Errorf("%s has labels %v, want mirror=m topic=orders how=whole", mf.GetName(), labels)
				}
				continue
			}
			if labels["mirror"] != "m" || labels["topic"] != "orders" || len(labels) != 2 {
				t.Errorf("%s has labels %v, want mirror=m topic=orders", mf.GetName(), labels)
			}
			switch {
			case m.GetCounter() != nil:
				values[mf.GetName()] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				values[mf.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	want := []string{"kmirror_checkpoint_save_duration_seconds", "kmirror_produce_request_duration_seconds",
		"kmirror_fetch_request_duration_seconds", "kmirror_copied_batches_total"}
	for _, name := range want {
		if !seen[name] {
			t.Errorf("no %s", name)
		}
	}
	if got := values["kmirror_mirrored_records_total"]; got != float64(len(recs)) {
		t.Errorf("kmirror_mirrored_records_total = %v, want %d", got, len(recs))
	}
	got := values["kmirror_mirrored_bytes_total"]
	if got <= float64(wantBytes) {
		// The batches as stored hold every key and value, and their framing.
		t.Errorf("kmirror_mirrored_bytes_total = %v copying batches, want more than the %d key and value bytes", got, wantBytes)
	}
	last := values["kmirror_last_mirrored_timestamp_seconds"]
	if last < float64(start.Unix()) || last > float64(time.Now().Unix()+1) {
		t.Errorf("kmirror_last_mirrored_timestamp_seconds = %v, want between %d and now", last, start.Unix())
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

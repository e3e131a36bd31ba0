package metadatasync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// mirrorFamilies are the families an instance exports per mirror from its
// own work (the rest come from Postgres at scrape time).
var mirrorFamilies = []string{
	"kmirror_mirrored_records_total",
	"kmirror_mirrored_bytes_total",
	"kmirror_last_mirrored_timestamp_seconds",
	"kmirror_fetch_request_duration_seconds",
	"kmirror_metadata_sync_passes_total",
	"kmirror_metadata_sync_kind_ok",
	"kmirror_metadata_sync_last_pass_timestamp_seconds",
	"kmirror_metadata_sync_last_pass_duration_seconds",
}

// mirrorSeries returns, per family, the instances whose registry has a
// series labelled with the mirror.
func mirrorSeries(t *testing.T, regs map[string]*prometheus.Registry, mirror string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for id, reg := range regs {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "mirror" && l.GetValue() == mirror && !slices.Contains(out[f.GetName()], id) {
						out[f.GetName()] = append(out[f.GetName()], id)
					}
				}
			}
		}
	}
	return out
}

// TestDeletedMirrorLeavesNoSeries: once a mirror is deleted, no instance
// exports a series of it, neither the one that held its leases nor the
// others, while another mirror keeps its series.
func TestDeletedMirrorLeavesNoSeries(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	regs := map[string]*prometheus.Registry{}
	for _, id := range []string{"a", "b"} {
		regs[id] = prometheus.NewPedanticRegistry()
		env.startSyncNode(id, workertest.InstanceOpts{Registerer: regs[id]})
	}
	env.CreateSourceTopics(2, "gone", "kept")
	workertest.Produce(t, env.Clusters.SourceAddr(), "gone", 2, 20, kgo.NoCompression())
	workertest.Produce(t, env.Clusters.SourceAddr(), "kept", 2, 20, kgo.NoCompression())
	env.syncCreateMirror("gone", "gone", service.SourceInput{}, nil)
	env.syncCreateMirror("kept", "kept", service.SourceInput{}, nil)
	workertest.WaitMirrored(t, env.Env, "gone", 2, 30*time.Second)
	workertest.WaitMirrored(t, env.Env, "kept", 2, 30*time.Second)
	env.syncNow("gone")
	env.syncNow("kept")

	for _, mirror := range []string{"gone", "kept"} {
		workertest.WaitFor(t, 10*time.Second, "every family has series of "+mirror, func() (bool, string) {
			got := mirrorSeries(t, regs, mirror)
			var missing []string
			for _, f := range mirrorFamilies {
				if len(got[f]) == 0 {
					missing = append(missing, f)
				}
			}
			return len(missing) == 0, fmt.Sprintf("no series of %s in %v", mirror, missing)
		})
	}

	ctx := context.Background()
	if _, err := env.Svc.RemoveTopics(ctx, "gone", ".*"); err != nil {
		t.Fatal(err)
	}
	if err := env.Svc.DeleteMirror(ctx, "gone", service.DeleteOpts{Wait: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	workertest.WaitFor(t, 15*time.Second, "no series of the deleted mirror", func() (bool, string) {
		got := mirrorSeries(t, regs, "gone")
		var left []string
		for f, ids := range got {
			left = append(left, f+" on "+strings.Join(ids, ","))
		}
		slices.Sort(left)
		return len(left) == 0, strings.Join(left, "; ")
	})
	got := mirrorSeries(t, regs, "kept")
	for _, f := range mirrorFamilies {
		if len(got[f]) == 0 {
			t.Errorf("%s lost the series of mirror kept, which was not deleted", f)
		}
	}
}

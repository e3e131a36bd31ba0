package metadatasync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// reachabilityWait bounds how long a probe takes to see a change: a probe
// every 5 s, and a refused connection fails at once.
const reachabilityWait = 20 * time.Second

// reachableSeries returns kmirror_cluster_reachable by "cluster/mirror", as
// a scrape of any instance shows it.
func reachableSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "kmirror_cluster_reachable" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["cluster"]+"/"+labels["mirror"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

// reachabilityString renders a status answer for messages: "true", "false
// (error)" or "unknown".
func reachabilityString(c service.ClusterReachability) string {
	switch {
	case !c.Known:
		return "unknown"
	case c.Reachable:
		return "true"
	}
	return "false (" + c.Error + ")"
}

// waitReachability waits until the mirror's status and the metric say the
// same about the cluster ("source" or "destination"): want is "true",
// "false" or "unknown".
func (env *engineEnv) waitReachability(reg *prometheus.Registry, mirror, cluster, want string) service.ClusterReachability {
	t := env.T
	t.Helper()
	var got service.ClusterReachability
	workertest.WaitFor(t, reachabilityWait, fmt.Sprintf("%s of %s reachable %s", cluster, mirror, want), func() (bool, string) {
		m, err := env.Svc.GetMirror(context.Background(), mirror)
		if err != nil {
			t.Fatal(err)
		}
		got = m.Status.Source
		key := "source/" + mirror
		if cluster == "destination" {
			got, key = m.Status.Destination, "destination/"
		}
		series, ok := reachableSeries(t, reg)[key]
		status := reachabilityString(got)
		metric := map[bool]string{true: fmt.Sprint(series == 1), false: "unknown"}[ok]
		return strings.HasPrefix(status, want) && metric == want,
			fmt.Sprintf("status %s, metric %s", status, metric)
	})
	return got
}

// TestClusterReachability: each cluster's reachability shows in the
// mirror's status and in kmirror_cluster_reachable within seconds of an
// outage and of the return, and turns unknown once the instance that
// probed it is gone.
func TestClusterReachability(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{DataDir: t.TempDir()})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(service.NewStateCollector(env.Pool))
	in := env.startSyncNode("a", workertest.InstanceOpts{})
	env.syncCreateMirror("m", "", service.SourceInput{}, nil)

	env.waitReachability(reg, "m", "source", "true")
	up := env.waitReachability(reg, "m", "destination", "true")

	if err := env.Clusters.Down("source"); err != nil {
		t.Fatal(err)
	}
	down := env.waitReachability(reg, "m", "source", "false")
	if !strings.Contains(down.Error, env.Clusters.SourceAddr()) {
		t.Errorf("the source's error %q does not say which cluster failed", down.Error)
	}
	// The destination is probed on its own.
	if got := env.waitReachability(reg, "m", "destination", "true"); !got.Since.Equal(up.Since) {
		t.Errorf("the destination's since moved from %s to %s while its answer stayed", up.Since, got.Since)
	}
	if err := env.Clusters.Up("source"); err != nil {
		t.Fatal(err)
	}
	if back := env.waitReachability(reg, "m", "source", "true"); !back.Since.After(down.Since) {
		t.Errorf("the source is reachable since %s, not after its outage began at %s", back.Since, down.Since)
	}

	if err := env.Clusters.Down("destination"); err != nil {
		t.Fatal(err)
	}
	dst := env.waitReachability(reg, "m", "destination", "false")
	if !strings.Contains(dst.Error, "instance a") {
		t.Errorf("the destination's error %q does not name the instance that failed to reach it", dst.Error)
	}
	if err := env.Clusters.Up("destination"); err != nil {
		t.Fatal(err)
	}
	env.waitReachability(reg, "m", "destination", "true")

	// A value whose prober is gone is not kept as the truth.
	in.Crash()
	env.waitReachability(reg, "m", "source", "unknown")
	env.waitReachability(reg, "m", "destination", "unknown")
}

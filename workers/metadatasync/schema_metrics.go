package metadatasync

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"kmirror/service"
)

// schemaMetrics are the kmirror_schema_sync_* metrics, by mirror.
type schemaMetrics struct {
	passes      *prometheus.CounterVec
	copied      *prometheus.CounterVec
	subjects    *prometheus.GaugeVec
	failed      *prometheus.GaugeVec
	lastSuccess *prometheus.GaugeVec
}

func newSchemaMetrics(reg prometheus.Registerer) (*schemaMetrics, error) {
	m := &schemaMetrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_schema_sync_passes_total",
			Help: "Schema Registry sync passes run by this instance, by outcome (ok: every subject synced)."}, []string{"mirror", "outcome"}),
		copied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_schema_sync_versions_copied_total",
			Help: "Schema versions written to the destination registry with their source ids."}, []string{"mirror"}),
		subjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kmirror_schema_sync_subjects",
			Help: "Subjects the last schema sync pass of the mirror kept in step or opened."}, []string{"mirror"}),
		failed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kmirror_schema_sync_failed_subjects",
			Help: "Subjects the last schema sync pass of the mirror failed to sync; 1 when the whole pass failed."}, []string{"mirror"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kmirror_schema_sync_last_success_timestamp_seconds",
			Help: "When a schema sync pass of the mirror last succeeded."}, []string{"mirror"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.passes, m.copied, m.subjects, m.failed, m.lastSuccess} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("metadata syncer: register schema metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *schemaMetrics) observe(mirror string, res *service.SchemaSyncResult) {
	outcome := "ok"
	if !res.OK {
		outcome = "error"
	}
	m.passes.WithLabelValues(mirror, outcome).Inc()
	m.copied.WithLabelValues(mirror).Add(float64(res.Copied))
	m.subjects.WithLabelValues(mirror).Set(float64(len(res.Subjects)))
	failed := res.Failed
	if res.Error != "" {
		failed = max(failed, 1)
	}
	m.failed.WithLabelValues(mirror).Set(float64(failed))
	if res.LastOKAt != nil {
		m.lastSuccess.WithLabelValues(mirror).Set(float64(res.LastOKAt.UnixMilli()) / 1000)
	}
}

// forget drops a mirror's gauges once another instance syncs it.
func (m *schemaMetrics) forget(mirror string) {
	for _, g := range []*prometheus.GaugeVec{m.subjects, m.failed, m.lastSuccess} {
		g.DeletePartialMatch(prometheus.Labels{"mirror": mirror})
	}
}

// forgetMirror drops every series of a deleted mirror.
func (m *schemaMetrics) forgetMirror(mirror string) {
	m.forget(mirror)
	for _, c := range []*prometheus.CounterVec{m.passes, m.copied} {
		c.DeletePartialMatch(prometheus.Labels{"mirror": mirror})
	}
}

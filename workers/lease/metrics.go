package lease

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// managerMetrics time the lease renewals of this instance and count the
// ones that failed.
type managerMetrics struct {
	renewal  prometheus.Histogram
	failures *prometheus.CounterVec
}

func newManagerMetrics(reg prometheus.Registerer) (*managerMetrics, error) {
	m := &managerMetrics{
		renewal: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kmirror_lease_renewal_duration_seconds",
			Help:    "How long one renewal round of this instance's leases took: the session, then each kind of lease.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_lease_renewal_failures_total",
			Help: "Lease renewal statements of this instance that failed, by what they renewed (session, partition, mirror metadata)."}, []string{"kind"}),
	}
	for _, kind := range []string{"session", "partition", "mirror metadata"} {
		m.failures.WithLabelValues(kind) // zeros, so that increase() alerts see the first failure
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.renewal, m.failures} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("lease manager: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

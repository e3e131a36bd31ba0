package heartbeat

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	rejected *prometheus.CounterVec
	lastWarn atomic.Value // time.Time of the last warning of a rejected heartbeat
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kmirror_heartbeats_rejected_total",
		Help: "Heartbeats read from __mirror_heartbeats and ignored because they fail the check, by reason: malformed, unknown_key (no key read from the database signed it), bad_mac. Any is a client other than kmirror writing the topic.",
	}, []string{"reason"})}
	m.lastWarn.Store(time.Time{})
	if reg == nil {
		return m, nil
	}
	if err := reg.Register(m.rejected); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		m.rejected = are.ExistingCollector.(*prometheus.CounterVec)
	}
	return m, nil
}

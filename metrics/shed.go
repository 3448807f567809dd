package metrics

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// shedMetrics count session shedding: the sessions closed and the traffic
// they carried when closed.
type shedMetrics struct {
	shed  *prometheus.CounterVec
	moved *prometheus.CounterVec
}

func newShedMetrics(reg prometheus.Registerer) *shedMetrics {
	m := &shedMetrics{
		shed: counterVec("sessions_shed_total",
			"Sessions closed by session shedding (shed:), by the server they were closed on.", "backend", "server"),
		moved: counterVec("sessions_shed_rate_bytes_per_second_total",
			"Sum of the measured rates (bytes/s) of the sessions shed: the traffic moved off each server, "+
				"as it was at each shed (the clients reconnect and HAProxy places them again).", "backend", "server"),
	}
	reg.MustRegister(m.shed, m.moved)
	return m
}

// observe counts the sessions a cycle closed; one that had ended or could
// not be closed moved nothing. A shedding backend's servers get their series
// at 0 from its first cycle, so that increase() sees the first shed.
func (m *shedMetrics) observe(c weighter.Cycle) {
	if c.Plan.Shed != nil {
		for _, s := range c.Plan.Servers {
			m.shed.WithLabelValues(c.Backend, s.Server)
			m.moved.WithLabelValues(c.Backend, s.Server)
		}
	}
	for _, r := range c.Sheds {
		if r.Outcome != weighter.ShedClosed {
			continue
		}
		s := r.Session
		m.shed.WithLabelValues(c.Backend, s.Server).Inc()
		if s.Rate > 0 && !math.IsInf(s.Rate, 0) {
			m.moved.WithLabelValues(c.Backend, s.Server).Add(s.Rate)
		}
	}
}

func (m *shedMetrics) forget(backend string) {
	l := prometheus.Labels{"backend": backend}
	m.shed.DeletePartialMatch(l)
	m.moved.DeletePartialMatch(l)
}

// forgetServer drops the series of a server that left the backend.
func (m *shedMetrics) forgetServer(backend, server string) {
	m.shed.DeleteLabelValues(backend, server)
	m.moved.DeleteLabelValues(backend, server)
}

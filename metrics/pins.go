package metrics

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// pinMetrics export the pinning of heavy clients (weighter.PinPlan): the
// pins in force and where, what they weigh, the table's state, the writes
// and the clients the socket table learnt. No series is labelled by a
// client's address: a backend's series are bounded by its servers.
type pinMetrics struct {
	pins      *prometheus.GaugeVec
	clients   *prometheus.GaugeVec // pinned_clients
	load      *prometheus.GaugeVec // pinned_load
	writes    *prometheus.CounterVec
	storms    *prometheus.CounterVec
	table     *prometheus.GaugeVec
	projected *prometheus.GaugeVec
	learnt    *prometheus.GaugeVec // clients{state}

	mu      sync.Mutex
	servers map[string]map[string]bool // backend → servers whose pin series are exported
}

// pinTableStates are the values of pin_table's state label.
var pinTableStates = []string{weighter.PinTableOK, weighter.PinTableMissing, weighter.PinTableFull, weighter.PinTableError}

func newPinMetrics(reg prometheus.Registerer) *pinMetrics {
	m := &pinMetrics{
		pins: gaugeVec("pins",
			"Clients pinned to a server through the backend's stick table after the last cycle (in a dry run: the pins the plan wants).", "backend"),
		clients: gaugeVec("pinned_clients",
			"Clients pinned to the server after the last cycle.", "backend", "server"),
		load: gaugeVec("pinned_load",
			"Sum of the rates of the clients pinned to the server, in the fast signal's unit (bytes/s), as the last cycle's read measured them "+
				"(a client not measured counts 0).", "backend", "server"),
		writes: counterVec("pin_writes_total",
			"Stick-table entries written to HAProxy, by op: set (a pin created or moved), clear (a pin withdrawn).", "backend", "op"),
		storms: counterVec("pin_storms_total",
			"Reconnect storms pinned: cycles that found most of the measured client load's connections closed at once (an HAProxy restart) "+
				"and pinned every client measured before by its last rate.", "backend"),
		table: gaugeVec("pin_table",
			"1 for the state of the backend's pin table: ok, missing (no stick table matched on the source: nothing is pinned), "+
				"full (no new pin), error (not read: the pins stay as they were).", "backend", "state"),
		projected: gaugeVec("pin_projected_imbalance",
			"Max/mean of the servers that can take a pin with the pinned clients where the last plan pins them; absent when undefined.", "backend"),
		learnt: gaugeVec("clients",
			"Client source addresses of a pinning backend in the newest socket table read: tracked (each with its rate: pinning chooses among them), "+
				"untracked (beyond the bound: never pinned).", "backend", "state"),
		servers: map[string]map[string]bool{},
	}
	reg.MustRegister(m.pins, m.clients, m.load, m.writes, m.storms, m.table, m.projected, m.learnt)
	return m
}

// observe exports a cycle's pins. A cycle without a pin plan leaves them as
// they were (a failed read made none), unless it went through (ok,
// skipped_coverage): then the backend does not pin (any more: a reload
// turned it off, or it is not an HAProxy backend) and has no pin series.
func (m *pinMetrics) observe(c weighter.Cycle) {
	p := c.Plan.Pins
	if p == nil {
		if c.Result == weighter.ResultOK || c.Result == weighter.ResultSkippedCoverage {
			m.forgetPlan(c.Backend)
		}
		return
	}
	state := p.TableState()
	for _, s := range pinTableStates {
		m.table.WithLabelValues(c.Backend, s).Set(b2f(s == state))
	}
	m.pins.WithLabelValues(c.Backend).Set(float64(len(p.Pins)))
	if pr := p.Projected; pr > 0 && !math.IsInf(pr, 0) {
		m.projected.WithLabelValues(c.Backend).Set(pr)
	} else {
		m.projected.DeleteLabelValues(c.Backend)
	}
	set, clear := m.writes.WithLabelValues(c.Backend, "set"), m.writes.WithLabelValues(c.Backend, "clear")
	storms := m.storms.WithLabelValues(c.Backend)
	if c.Applied && (c.Result == weighter.ResultOK || c.Result == weighter.ResultSkippedCoverage) {
		// Written: a failed batch is the cycle's haproxy_error, and a
		// dry run writes nothing.
		set.Add(float64(len(p.Changes.Set)))
		clear.Add(float64(len(p.Changes.Clear)))
		if p.StormBegan {
			storms.Inc()
		}
	}
	m.setServers(c, p)
}

// setServers exports each server's pins and their load: every server of
// the cycle at 0 without one, so that a dashboard sees a pin arrive, and
// the servers that left dropped.
func (m *pinMetrics) setServers(c weighter.Cycle, p *weighter.PinPlan) {
	count, load := map[string]float64{}, map[string]float64{}
	for _, s := range c.Plan.Servers {
		count[s.Server], load[s.Server] = 0, 0
	}
	for _, s := range c.Servers {
		count[s.Name], load[s.Name] = 0, 0
	}
	for _, r := range pinnedRates(p.Pins, c.Signal) {
		count[r.server]++
		load[r.server] += r.rate
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.servers[c.Backend] {
		if _, ok := count[s]; !ok {
			m.clients.DeleteLabelValues(c.Backend, s)
			m.load.DeleteLabelValues(c.Backend, s)
		}
	}
	now := make(map[string]bool, len(count))
	for s, n := range count {
		now[s] = true
		m.clients.WithLabelValues(c.Backend, s).Set(n)
		m.load.WithLabelValues(c.Backend, s).Set(load[s])
	}
	m.servers[c.Backend] = now
}

// pinnedRate is one pin with its client's rate (0 when not measured).
type pinnedRate struct {
	server string
	rate   float64
}

// pinnedRates are the pins with their clients' rates in sig's read (the
// client's heaviest entry, as the Pinner takes it). The clients are
// scanned once against the pins (a few hundred of up to 100,000 clients).
func pinnedRates(pins []weighter.Pin, sig *weighter.Signal) []pinnedRate {
	if len(pins) == 0 {
		return nil
	}
	at := make(map[string]int, len(pins))
	out := make([]pinnedRate, len(pins))
	for i, p := range pins {
		at[p.Client] = i
		out[i].server = p.Server
	}
	if sig == nil {
		return out
	}
	for _, cl := range sig.Clients {
		if i, ok := at[cl.Addr]; ok && cl.Rate > out[i].rate && !math.IsInf(cl.Rate, 0) {
			out[i].rate = cl.Rate
		}
	}
	return out
}

// setClients exports the clients the socket table learnt; read false (no
// listeners, another reader serving, no read yet) drops them.
func (m *pinMetrics) setClients(backend string, read bool, tracked, untracked int) {
	if !read {
		m.learnt.DeletePartialMatch(prometheus.Labels{"backend": backend})
		return
	}
	m.learnt.WithLabelValues(backend, "tracked").Set(float64(tracked))
	m.learnt.WithLabelValues(backend, "untracked").Set(float64(untracked))
}

// forgetPlan drops the series of a backend's pin plans: one that does not
// pin has none.
func (m *pinMetrics) forgetPlan(backend string) {
	m.mu.Lock()
	delete(m.servers, backend)
	m.mu.Unlock()
	l := prometheus.Labels{"backend": backend}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.pins, m.clients, m.load, m.writes, m.storms, m.table, m.projected} {
		v.DeletePartialMatch(l)
	}
}

// forget drops every pin series of a backend that is no longer configured.
func (m *pinMetrics) forget(backend string) {
	m.forgetPlan(backend)
	m.learnt.DeletePartialMatch(prometheus.Labels{"backend": backend})
}

// SetClients exports what the newest socket table read learnt of a pinning
// backend's clients: the addresses tracked and those beyond the bound.
// read false (no listeners, another reader serving, no read yet) drops the
// series.
func (m *Metrics) SetClients(backend string, read bool, tracked, untracked int) {
	m.pins.setClients(backend, read, tracked, untracked)
}

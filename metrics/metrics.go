// Package metrics exports what the weighter does as Prometheus metrics:
// per-server weights and loads, per-backend imbalance, cycle results and
// durations, writes, and the daemon's readiness.
package metrics

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

const namespace = "haproxy_weighter"

// Metrics holds the collectors; one per daemon, registered on its own registry.
type Metrics struct {
	weight       *prometheus.GaugeVec
	load         *prometheus.GaugeVec
	imbalance    *prometheus.GaugeVec
	rareArrivals *prometheus.GaugeVec
	settling     *prometheus.GaugeVec
	cycles       *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	writes       *prometheus.CounterVec
	lastSuccess  *prometheus.GaugeVec
	ready        prometheus.Gauge
	reloadStatus prometheus.Gauge
	// The fast signal and its calibration (weighter.Signal).
	fastState    *prometheus.GaugeVec
	fastReader   *prometheus.GaugeVec
	fastStreams  *prometheus.GaugeVec
	fastSkipped  *prometheus.GaugeVec
	fastAge      *prometheus.GaugeVec
	factor       *prometheus.GaugeVec
	uncalibrated *prometheus.GaugeVec
	externalAge  *prometheus.GaugeVec
	// What the plan wants, and what a dry run did not write (desired.go).
	desired      *prometheus.GaugeVec
	dryRun       *prometheus.GaugeVec
	dryRunWrites *prometheus.CounterVec
	shed         *shedMetrics
	pins         *pinMetrics

	// sockets exports the HAProxy runtime sockets (socket.go).
	sockets *socketCollector
	// addresses exports the servers' addresses (address.go).
	addresses *addressCollector

	mu      sync.Mutex
	servers map[string]map[string]bool // backend → servers whose series are exported
	factors map[string]map[string]bool // backend → servers whose calibration factor is exported
	readers map[string]bool            // backends whose fast signal says its reader
}

// fastReaders are the values of fast_signal_reader's reader label: an
// HAProxy backend's fast signal reads the first of them that works, none
// when every one fails (the source alone).
var fastReaders = []string{"kernel", "sessions", "stat", "none"}

// fastStates are the values of fast_signal_state's state label.
var fastStates = []weighter.FastState{weighter.FastLive, weighter.FastIdle, weighter.FastStarting,
	weighter.FastDead, weighter.FastOff}

// New creates the collectors and registers them, with the Go and process
// collectors, on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		weight: gaugeVec("server_weight", "Weight of the server in HAProxy (or IPVS) after the last cycle.", "backend", "server"),
		load:   gaugeVec("server_load", "Aggregated load of the server used by the last cycle.", "backend", "server"),
		imbalance: gaugeVec("backend_imbalance",
			"Highest server load divided by the mean load of the backend, in the last cycle.", "backend"),
		rareArrivals: gaugeVec("rare_arrivals",
			"1 while new connections are rare on the backend and the run bound spreads a burst over run_rare_spread servers (run_rare), else 0.", "backend"),
		settling: gaugeVec("settling",
			"1 while the configured weights HAProxy reset to are kept until the clients have reconnected (after a restart or reload), else 0.", "backend"),
		cycles: counterVec("cycles_total",
			"Cycles run, by result: ok, source_error, haproxy_error (HAProxy or IPVS), skipped_coverage.", "backend", "result"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "cycle_duration_seconds",
			Help: "Duration of one cycle: fetch, plan and write.",
			// From a local socket or netlink cycle (about 1-4 ms) to one cut
			// off by its timeout, which is the interval unless set (10 s to
			// 60 s and a little more): each timeout gets a finite bucket.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120},
		}, []string{"backend"}),
		writes: counterVec("weight_writes_total",
			"Server weights written (one per server and change).", "backend"),
		lastSuccess: gaugeVec("last_success_timestamp_seconds",
			"Unix time of the end of the last cycle with result ok.", "backend"),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "ready",
			Help: "1 when every backend had a successful cycle within 3 intervals.",
		}),
		reloadStatus: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "config_reload_success",
			Help: "1 if the last configuration (re)load succeeded, 0 if it was rejected.",
		}),
		fastState: gaugeVec("fast_signal_state",
			"1 for the state of the backend's fast signal (HAProxy's live per-server bytes): live (weights from it), "+
				"idle (nothing open or moving: the source alone), starting, dead (the source alone), off.", "backend", "state"),
		fastReader: gaugeVec("fast_signal_reader",
			"1 for what an HAProxy backend's fast signal reads: kernel (the kernel's socket table, every cycle, no cost to HAProxy), "+
				"sessions (show sess all, spaced by the stream count), stat (show stat byte counters), none (every reader failed: the source alone).",
			"backend", "reader"),
		fastStreams: gaugeVec("fast_signal_streams",
			"Streams of the whole HAProxy process in the newest show sess all dump (what a dump costs); absent while the fast signal reads something else.", "backend"),
		fastSkipped: gaugeVec("fast_signal_streams_skipped",
			"Streams the newest show sess all dump listed that the reader could not read and left out (the rest of the dump is used); absent while the fast signal reads something else.", "backend"),
		fastAge: gaugeVec("fast_signal_age_seconds",
			"Age of the fast signal read the last cycle used (show sess all dumps are spaced by the stream count).", "backend"),
		factor: gaugeVec("server_calibration_factor",
			"Calibration of the server's fast load by the source (true load per local byte, mean 1; 1 when uncalibrated).",
			"backend", "server"),
		uncalibrated: gaugeVec("backend_uncalibrated_servers",
			"Servers weighted by the fast signal alone although the source calibrates it: no usable point yet, or none for the hold (expired).",
			"backend"),
		externalAge: gaugeVec("external_data_age_seconds",
			"Age of the newest point read from the source that calibrates the fast signal; absent before the first.", "backend"),
		servers:   map[string]map[string]bool{},
		factors:   map[string]map[string]bool{},
		readers:   map[string]bool{},
		sockets:   newSocketCollector(),
		addresses: newAddressCollector(),
	}
	m.newDesired()
	reg.MustRegister(m.sockets, m.addresses)
	reg.MustRegister(m.weight, m.load, m.imbalance, m.rareArrivals, m.settling, m.cycles, m.duration, m.writes,
		m.lastSuccess, m.ready, m.reloadStatus,
		m.fastState, m.fastReader, m.fastStreams, m.fastSkipped, m.fastAge, m.factor, m.uncalibrated, m.externalAge,
		m.desired, m.dryRun, m.dryRunWrites,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		// haproxy_weighter_build_info{version,revision,goversion,…} 1, from
		// prometheus/common/version, which the command line fills in.
		versioncollector.NewCollector("haproxy_weighter"))
	m.shed = newShedMetrics(reg)
	m.pins = newPinMetrics(reg)
	return m
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

// Init creates the per-backend series at zero, so that a backend that never
// succeeded shows in /metrics (cycles_total{result="ok"} 0) rather than not at all.
func (m *Metrics) Init(backend string) {
	for _, r := range []string{weighter.ResultOK, weighter.ResultSourceError,
		weighter.ResultTargetError, weighter.ResultSkippedCoverage} {
		m.cycles.WithLabelValues(backend, r)
	}
	m.writes.WithLabelValues(backend)
}

// Forget drops every series of a backend that is no longer configured.
func (m *Metrics) Forget(backend string) {
	m.mu.Lock()
	delete(m.servers, backend)
	delete(m.factors, backend)
	delete(m.readers, backend)
	m.mu.Unlock()
	l := prometheus.Labels{"backend": backend}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.weight, m.load, m.imbalance, m.rareArrivals, m.settling, m.cycles, m.duration, m.writes, m.lastSuccess,
		m.fastState, m.fastReader, m.fastStreams, m.fastSkipped, m.fastAge, m.factor, m.uncalibrated, m.externalAge,
		m.desired, m.dryRun, m.dryRunWrites} {
		v.DeletePartialMatch(l)
	}
	m.shed.forget(backend)
	m.pins.forget(backend)
}

// Observe records one cycle. Weights and loads are only updated from a cycle
// that produced a plan; a failed read leaves the last known values.
func (m *Metrics) Observe(c weighter.Cycle) {
	m.cycles.WithLabelValues(c.Backend, c.Result).Inc()
	m.duration.WithLabelValues(c.Backend).Observe(c.Duration.Seconds())
	m.writes.WithLabelValues(c.Backend).Add(float64(len(c.Written)))
	m.shed.observe(c)
	m.pins.observe(c)
	if c.Result == weighter.ResultOK {
		m.lastSuccess.WithLabelValues(c.Backend).Set(float64(c.Plan.Time.Add(c.Duration).UnixNano()) / 1e9)
	}
	if c.Signal != nil {
		m.setSignal(c.Backend, c.Signal)
	}
	if !planned(c) {
		return
	}
	m.setServers(c)
	m.rareArrivals.WithLabelValues(c.Backend).Set(b2f(c.Plan.RareArrivals))
	m.settling.WithLabelValues(c.Backend).Set(b2f(c.Plan.Settling))
	// max/mean is at least 1; the plan says 0 when no server has a valid load,
	// and exporting that would read as a perfectly even backend.
	if im := c.Plan.Imbalance; im > 0 && !math.IsInf(im, 0) {
		m.imbalance.WithLabelValues(c.Backend).Set(im)
	} else {
		m.imbalance.DeleteLabelValues(c.Backend)
	}
}

// setServers exports the weight and load of each server of the plan. Servers
// come and go (HAProxy reload, IPVS change): the series of those that left are
// deleted, down to none when the backend has no servers left. The others are
// updated in place, never deleted and re-created, so a scrape meanwhile sees
// every server.
func (m *Metrics) setServers(c weighter.Cycle) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := make(map[string]bool, len(c.Plan.Servers))
	for _, s := range c.Plan.Servers {
		now[s.Server] = true
	}
	for s := range m.servers[c.Backend] {
		if !now[s] {
			m.weight.DeleteLabelValues(c.Backend, s)
			m.load.DeleteLabelValues(c.Backend, s)
			m.desired.DeleteLabelValues(c.Backend, s)
			m.shed.forgetServer(c.Backend, s)
		}
	}
	m.servers[c.Backend] = now
	written := map[string]int{}
	for _, ch := range c.Written {
		written[ch.Server] = ch.Weight
	}
	for _, s := range c.Plan.Servers {
		w := s.Current
		if nw, ok := written[s.Server]; ok {
			w = nw
		}
		m.weight.WithLabelValues(c.Backend, s.Server).Set(float64(w))
		m.desired.WithLabelValues(c.Backend, s.Server).Set(float64(s.New))
		if !math.IsNaN(s.Load) {
			m.load.WithLabelValues(c.Backend, s.Server).Set(s.Load)
		} else {
			m.load.DeleteLabelValues(c.Backend, s.Server)
		}
	}
}

// SetFastState exports the state of a backend's fast signal: off for one
// that does not read it, the state the start-up read found for the others.
func (m *Metrics) SetFastState(backend string, st weighter.FastState) {
	for _, s := range fastStates {
		v := 0.0
		if s == st {
			v = 1
		}
		m.fastState.WithLabelValues(backend, string(s)).Set(v)
	}
}

// setSignal exports the fast signal's state, its read and each server's
// calibration as the cycle found them. Factors are exported while the fast
// signal weighs; a server that left (or a cycle weighted by the source
// alone) keeps none, so no factor outlives its use.
func (m *Metrics) setSignal(backend string, sig *weighter.Signal) {
	m.SetFastState(backend, sig.Fast)
	m.setReader(backend, sig)
	if sig.Streams > 0 {
		m.fastStreams.WithLabelValues(backend).Set(float64(sig.Streams))
		m.fastSkipped.WithLabelValues(backend).Set(float64(sig.Skipped))
	} else if sig.Reader != "" {
		m.fastStreams.DeleteLabelValues(backend) // not a dump: no stream count
		m.fastSkipped.DeleteLabelValues(backend)
	}
	if sig.Streams > 0 || !sig.FastAt.IsZero() {
		m.fastAge.WithLabelValues(backend).Set(sig.FastAge.Seconds())
	}
	if sig.ExternalAge >= 0 {
		m.externalAge.WithLabelValues(backend).Set(sig.ExternalAge.Seconds())
	}
	if !sig.Calibrate {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := map[string]bool{}
	if sig.Pipeline == weighter.PipelineCalibrated {
		m.uncalibrated.WithLabelValues(backend).Set(float64(sig.Uncalibrated))
		for name, in := range sig.Servers {
			now[name] = true
			m.factor.WithLabelValues(backend, name).Set(in.Factor)
		}
	}
	for name := range m.factors[backend] {
		if !now[name] {
			m.factor.DeleteLabelValues(backend, name)
		}
	}
	m.factors[backend] = now
}

// setReader exports what the fast signal read: sig.Reader, or none when a
// backend that said its reader before has none (its read failed). A
// backend whose reader never says (IPVS) has no series.
func (m *Metrics) setReader(backend string, sig *weighter.Signal) {
	reader := sig.Reader
	m.mu.Lock()
	if reader != "" {
		m.readers[backend] = true
	}
	known := m.readers[backend]
	m.mu.Unlock()
	if !known {
		return
	}
	if reader == "" {
		reader = "none"
	}
	for _, r := range fastReaders {
		m.fastReader.WithLabelValues(backend, r).Set(b2f(r == reader))
	}
}

// planned reports whether the cycle got as far as a plan, so that its list of
// servers is the backend's, even when empty. A cycle whose read failed has no
// plan; one whose write failed (a target error) does, and has servers.
func planned(c weighter.Cycle) bool {
	return c.Result == weighter.ResultOK || c.Result == weighter.ResultSkippedCoverage || len(c.Plan.Servers) > 0
}

// SetReady exports the readiness the daemon computed.
func (m *Metrics) SetReady(ok bool) { m.ready.Set(b2f(ok)) }

// SetReloadSuccess exports whether the last configuration load was accepted.
func (m *Metrics) SetReloadSuccess(ok bool) { m.reloadStatus.Set(b2f(ok)) }

func b2f(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// ReloadGauge is config_reload_success, for tests.
func (m *Metrics) ReloadGauge() prometheus.Gauge { return m.reloadStatus }

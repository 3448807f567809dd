package metrics

import "github.com/prometheus/client_golang/prometheus"

// SocketState is one HAProxy runtime socket the daemon talks to: the
// backends weighted through it and how it answered last.
type SocketState struct {
	Socket   string
	Backends []string
	// Known is false before the first exchange through the socket ended.
	Known bool
	Up    bool
}

// socketCollector exports each socket's state as the daemon reports it when
// scraped: the sockets change with a reload, and a gauge set per cycle would
// keep those a reload dropped.
type socketCollector struct {
	watched[SocketState]

	up, info *prometheus.Desc
}

func newSocketCollector() *socketCollector {
	return &socketCollector{
		up: prometheus.NewDesc(namespace+"_haproxy_socket_up",
			"1 when the newest exchange with HAProxy through this runtime socket got a runtime API answer, 0 when it failed (dial, I/O, timeout, garbage); absent before the first.",
			[]string{"socket"}, nil),
		info: prometheus.NewDesc(namespace+"_backend_socket_info",
			"The HAProxy runtime socket each backend is weighted through (value 1).",
			[]string{"backend", "socket"}, nil),
	}
}

// WatchSockets makes /metrics report the sockets state returns at each scrape.
func (m *Metrics) WatchSockets(state func() []SocketState) {
	m.sockets.watch(state)
}

func (c *socketCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.info
}

func (c *socketCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.get() {
		if s.Known {
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, b2f(s.Up), s.Socket)
		}
		for _, b := range s.Backends {
			ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, b, s.Socket)
		}
	}
}

package metrics

import "github.com/prometheus/client_golang/prometheus"

// AddressState is what /metrics says of one backend's server addresses.
type AddressState struct {
	Backend string
	// Servers maps each server's name to its address (ip:port), as HAProxy
	// reported them in the newest read.
	Servers map[string]string
	// ByAddress is set when the source's series are matched by address;
	// then Unknown, Ambiguous and Duplicate count the series the newest
	// fetch left out, by why.
	ByAddress                     bool
	Unknown, Ambiguous, Duplicate int
}

// addressCollector exports the addresses when scraped, from the daemon's
// newest reads: an address that changes (set server addr, DNS) must not
// leave the old one's series behind.
type addressCollector struct {
	watched[AddressState]

	info, unmatched *prometheus.Desc
}

func newAddressCollector() *addressCollector {
	return &addressCollector{
		info: prometheus.NewDesc(namespace+"_server_info",
			"The address (ip:port) of each server, as HAProxy reported it in the newest read (value 1).",
			[]string{"backend", "server", "address"}, nil),
		unmatched: prometheus.NewDesc(namespace+"_address_unmatched_series",
			"With match: address, series of the newest fetch matched to no server, by reason: unknown (no server has the address), "+
				"ambiguous (servers share it), duplicate (several series match one server, which is left out).",
			[]string{"backend", "reason"}, nil),
	}
}

// WatchAddresses makes /metrics report the addresses state returns at each scrape.
func (m *Metrics) WatchAddresses(state func() []AddressState) {
	m.addresses.watch(state)
}

func (c *addressCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.info
	ch <- c.unmatched
}

func (c *addressCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.get() {
		for server, addr := range s.Servers {
			ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, s.Backend, server, addr)
		}
		if !s.ByAddress {
			continue
		}
		for reason, n := range map[string]int{"unknown": s.Unknown, "ambiguous": s.Ambiguous, "duplicate": s.Duplicate} {
			ch <- prometheus.MustNewConstMetric(c.unmatched, prometheus.GaugeValue, float64(n), s.Backend, reason)
		}
	}
}

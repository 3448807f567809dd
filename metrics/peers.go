package metrics

import "github.com/prometheus/client_golang/prometheus"

// Peers are the gauges of the other balancers' fast readings (package
// peers): whether each peer is added, and how many each backend's last
// cycle added. Registered apart from New's collectors, by the daemon that
// peers, on the registry it serves /metrics from.
type Peers struct {
	up    *prometheus.GaugeVec // per peer: 1 when its readings are added
	added *prometheus.GaugeVec // per backend: peers added in the last cycle
}

// NewPeers creates the peers' gauges and registers them on reg.
func NewPeers(reg prometheus.Registerer) *Peers {
	m := &Peers{
		up: gaugeVec("peer_up",
			"1 when the peer's fresh readings are added to this daemon's fast signal, 0 when it is left out (down, slow, stale, garbage, itself).",
			"peer"),
		added: gaugeVec("backend_peers_added",
			"Peers whose readings the backend's last cycle added to its own fast signal.", "backend"),
	}
	reg.MustRegister(m.up, m.added)
	return m
}

// SetUp says whether the peer's readings are added (up) or left out.
func (m *Peers) SetUp(peer string, up bool) { m.up.WithLabelValues(peer).Set(b2f(up)) }

// ForgetPeer drops the series of a peer no longer asked.
func (m *Peers) ForgetPeer(peer string) { m.up.DeleteLabelValues(peer) }

// SetAdded says how many peers the backend's last cycle added.
func (m *Peers) SetAdded(backend string, n int) { m.added.WithLabelValues(backend).Set(float64(n)) }

// ForgetBackend drops the backend's count: it is gone, or there are no peers
// any more, and a dashboard must not go on showing peers added.
func (m *Peers) ForgetBackend(backend string) { m.added.DeleteLabelValues(backend) }

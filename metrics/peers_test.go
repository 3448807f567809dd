package metrics

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
)

// The peers' gauges keep the names, help and labels that dashboards and
// alerts (examples/) read; a peer or backend forgotten loses its series
// rather than showing its last value.
func TestPeersGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewPeers(reg)
	m.SetUp("http://a:9090", true)
	m.SetUp("http://b:9090", false)
	m.SetAdded("be", 1)
	m.SetAdded("gone", 2)
	m.ForgetBackend("gone")
	const want = `
# HELP haproxy_weighter_peer_up 1 when the peer's fresh readings are added to this daemon's fast signal, 0 when it is left out (down, slow, stale, garbage, itself).
# TYPE haproxy_weighter_peer_up gauge
haproxy_weighter_peer_up{peer="http://a:9090"} 1
haproxy_weighter_peer_up{peer="http://b:9090"} 0
# HELP haproxy_weighter_backend_peers_added Peers whose readings the backend's last cycle added to its own fast signal.
# TYPE haproxy_weighter_backend_peers_added gauge
haproxy_weighter_backend_peers_added{backend="be"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))

	m.ForgetPeer("http://a:9090")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP haproxy_weighter_peer_up 1 when the peer's fresh readings are added to this daemon's fast signal, 0 when it is left out (down, slow, stale, garbage, itself).
# TYPE haproxy_weighter_peer_up gauge
haproxy_weighter_peer_up{peer="http://b:9090"} 0
`), "haproxy_weighter_peer_up"))
}

// Prometheus' own linter passes the peers' gauges, as it does New's
// collectors (TestPromtoolLint).
func TestPeersGaugesLint(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool not found (install it: apt-get install prometheus)")
	reg := prometheus.NewRegistry()
	m := NewPeers(reg)
	m.SetUp("http://a:9090", true)
	m.SetAdded("be", 1)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var text bytes.Buffer
	for _, mf := range mfs {
		_, err := expfmt.MetricFamilyToText(&text, mf)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = &text
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)
}

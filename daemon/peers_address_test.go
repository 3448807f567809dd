package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// Two balancers whose server names do not name the same servers
// (server-template fills its slots in the order DNS answers, which differs
// from one balancer to the next): balancer A's s1 is sink X and s2 sink Y,
// B's s1 is Y and s2 X. Each balancer's traffic goes by its frontend's port:
// A sends 10 kB/s to each of its servers, B 40 kB/s to its s1 (Y) and
// 4 kB/s to its s2 (X). Per connection X carries (10+4)/2 = 7 kB/s and Y
// (10+40)/2 = 25 kB/s, which both daemons must see: summed by name, each
// saw the opposite (A: s1 = X at 25 kB/s), and weighed the hotter server
// up.
func TestPeersMatchServersByAddress(t *testing.T) {
	x, y := testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)
	type balancer struct {
		servers [2]string // s1, s2
		rates   [2]int    // bytes every 100 ms to s1, s2
	}
	bs := [2]balancer{{servers: [2]string{x, y}, rates: [2]int{1000, 1000}}, {servers: [2]string{y, x}, rates: [2]int{4000, 400}}}
	var hs [2]*testenv.HAProxy
	for i, b := range bs {
		fronts := [2]int{testenv.FreePort(t), testenv.FreePort(t)}
		hs[i] = testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe1
  bind 127.0.0.1:%d
  default_backend be
frontend fe2
  bind 127.0.0.1:%d
  default_backend be
backend be
  use-server s1 if { dst_port %d }
  use-server s2 if { dst_port %d }
  server s1 %s weight 100
  server s2 %s weight 100
`, fronts[0], fronts[1], fronts[0], fronts[1], b.servers[0], b.servers[1]))
		for j, port := range fronts {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			testenv.WriteEvery(t, c, b.rates[j], 100*time.Millisecond)
		}
	}
	ports := [2]int{testenv.FreePort(t), testenv.FreePort(t)}
	var regs [2]*prometheus.Registry
	for i := range hs {
		regs[i] = prometheus.NewRegistry()
		n := &recordingNotifier{ready: make(chan struct{})}
		d := New(peerConfig(t, hs[i].Socket, ports[i], ports[1-i]), Options{Registry: regs[i], Notifier: n,
			Log: slog.New(slog.DiscardHandler)})
		startDaemon(t, d, n)
	}
	load := func(i int, server string) float64 {
		return series(t, regs[i], "haproxy_weighter_server_load", map[string]string{"backend": "be", "server": server})
	}
	// Balancer i's name of sink X and of sink Y.
	names := [2][2]string{{"s1", "s2"}, {"s2", "s1"}}
	for i := range hs {
		waitFor(t, fmt.Sprintf("daemon %d adds its peer", i), func() bool {
			return series(t, regs[i], "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"}) == 1
		})
		waitFor(t, fmt.Sprintf("daemon %d sees X at 7 kB/s and Y at 25 kB/s per connection", i), func() bool {
			lx, ly := load(i, names[i][0]), load(i, names[i][1])
			return lx > 5_500 && lx < 8_500 && ly > 22_000 && ly < 28_000
		})
	}
}

// Matched by address when the balancers share any; by name when they share
// none (they reach the servers at other addresses) or the peer does not say
// them (an older daemon); one server under two names on the peer counts
// once with both names' readings.
func TestPeerMatchFallsBackToNames(t *testing.T) {
	own := map[string]string{"s1": "10.0.0.1:80", "s2": "10.0.0.2:80"}
	r := func(rate float64, addr string) peerServerRead {
		return peerServerRead{BytesPerSecond: rate, Sessions: 1, Address: addr}
	}
	swapped := matchPeer(map[string]peerServerRead{"s1": r(10, "10.0.0.2:80"), "s2": r(20, "10.0.0.1:80")}, own)
	require.Equal(t, 20.0, swapped.of("s1", own["s1"]).BytesPerSecond)
	require.Equal(t, 10.0, swapped.of("s2", own["s2"]).BytesPerSecond)
	elsewhere := matchPeer(map[string]peerServerRead{"s1": r(10, "192.168.0.2:80"), "s2": r(20, "192.168.0.1:80")}, own)
	require.Equal(t, 10.0, elsewhere.of("s1", own["s1"]).BytesPerSecond)
	older := matchPeer(map[string]peerServerRead{"s1": r(10, ""), "s2": r(20, "")}, own)
	require.Equal(t, 10.0, older.of("s1", own["s1"]).BytesPerSecond)
	twice := matchPeer(map[string]peerServerRead{"a": r(10, "10.0.0.1:80"), "b": r(5, "10.0.0.1:80")}, own)
	require.Equal(t, peerServerRead{BytesPerSecond: 15, Sessions: 2, Address: "10.0.0.1:80"}, twice.of("s1", own["s1"]))
	require.Equal(t, peerServerRead{}, twice.of("s2", own["s2"]), "a server the peer does not reach")
}

// Two own servers at one address (two server lines to one real server): the
// peer's reading of that address is shared between them, not added to each,
// so the backend's summed load counts it once.
func TestPeerReadingOfASharedOwnAddressIsAddedOnce(t *testing.T) {
	own := map[string]string{"s1": "10.0.0.1:80", "s1b": "10.0.0.1:80", "s2": "10.0.0.2:80"}
	m := matchPeer(map[string]peerServerRead{
		"p1": {BytesPerSecond: 30, Sessions: 4, Address: "10.0.0.1:80"},
		"p2": {BytesPerSecond: 5, Sessions: 1, Address: "10.0.0.2:80"},
	}, own)
	total := 0.0
	for name, addr := range own {
		total += m.of(name, addr).BytesPerSecond
	}
	require.Equal(t, 35.0, total, "the peer's 35 B/s in all, each address once")
	require.Equal(t, peerServerRead{BytesPerSecond: 15, Sessions: 2, Address: "10.0.0.1:80"}, m.of("s1b", own["s1b"]))
	require.Equal(t, 5.0, m.of("s2", own["s2"]).BytesPerSecond)
}

package daemon

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/peers"
)

// Peering as the daemon wires it: several daemons over real HAProxies
// weigh by every balancer's load, over TLS and basic auth, a reload that
// changes the peers or their client, and their pollers' end at reload and
// stop. What a peer set does by itself is tested in package peers.

func peerConfig(t *testing.T, socket string, listen int, peer int) *config.Config {
	t.Helper()
	yml := fmt.Sprintf("listen: 127.0.0.1:%d\ninterval: 500ms\npeers: [\"http://127.0.0.1:%d\"]\nhaproxy: {socket: %s}\n"+
		"backends:\n  - name: be\n    source: {haproxy: {counter: bytes_in}}\n", listen, peer, socket)
	cfg, err := config.Parse("peer.yml", []byte(yml), nil)
	require.NoError(t, err)
	return cfg
}

// parsePeerConfig parses a daemon's configuration: yml's top-level keys and
// backend be, read from HAProxy's socket.
func parsePeerConfig(t *testing.T, socket, yml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "peer.yml"), []byte(yml+"haproxy: {socket: "+socket+"}\n"+
		"backends:\n  - name: be\n    source: {haproxy: {counter: bytes_in}}\n"), nil)
	require.NoError(t, err)
	return cfg
}

// webConfigFile writes exporter-toolkit's web configuration asking for TLS
// with files' certificate and for basic auth of user with password.
func webConfigFile(t *testing.T, files testenv.TLSFiles, user, password string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "web.yml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf("tls_server_config: {cert_file: %s, key_file: %s}\n"+
		"basic_auth_users: {%s: %q}\n", files.Cert, files.Key, user, hash)), 0o600))
	return path
}

// goroutinesIn counts the goroutines whose stack mentions fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// Two balancers in front of the same servers, each with its own daemon, the
// daemons peering over loopback: each weighs by the sum of both balancers'
// traffic. Balancer A's clients send 1 kB every 100 ms, B's 4 kB: alone, A's
// daemon sees 10 kB/s per connection and B's 40 kB/s; summed, both see the
// servers' 25 kB/s per connection.
func TestTwoDaemonsWeighByBothBalancers(t *testing.T) {
	hs := testenv.StartTwoBalancers(t, [2]int{1000, 4000})
	ports := [2]int{testenv.FreePort(t), testenv.FreePort(t)}
	var regs [2]*prometheus.Registry
	var logs [2]*testenv.SyncBuffer
	for i := range hs {
		regs[i], logs[i] = prometheus.NewRegistry(), &testenv.SyncBuffer{}
		n := &recordingNotifier{ready: make(chan struct{})}
		d := New(peerConfig(t, hs[i].Socket, ports[i], ports[1-i]), Options{Registry: regs[i], Notifier: n,
			Log: slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))})
		startDaemon(t, d, n)
	}
	for i := range hs {
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1-i])
		testenv.WaitFor(t, fmt.Sprintf("daemon %d adds its peer", i), func() bool {
			return testenv.Gauge(t, regs[i], "haproxy_weighter_peer_up", map[string]string{"peer": peer}) == 1 &&
				testenv.Gauge(t, regs[i], "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"}) == 1
		})
	}
	for i := range hs {
		for _, s := range []string{"s1", "s2"} {
			testenv.WaitFor(t, fmt.Sprintf("daemon %d sees both balancers' load on %s", i, s), func() bool {
				l := testenv.Gauge(t, regs[i], "haproxy_weighter_server_load", map[string]string{"backend": "be", "server": s})
				return l > 20_000 && l < 30_000
			})
		}
		assert.Contains(t, logs[i].String(), "peer readings added to the fast signal")
	}
}

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
		return testenv.Gauge(t, regs[i], "haproxy_weighter_server_load", map[string]string{"backend": "be", "server": server})
	}
	// Balancer i's name of sink X and of sink Y.
	names := [2][2]string{{"s1", "s2"}, {"s2", "s1"}}
	for i := range hs {
		testenv.WaitFor(t, fmt.Sprintf("daemon %d adds its peer", i), func() bool {
			return testenv.Gauge(t, regs[i], "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"}) == 1
		})
		testenv.WaitFor(t, fmt.Sprintf("daemon %d sees X at 7 kB/s and Y at 25 kB/s per connection", i), func() bool {
			lx, ly := load(i, names[i][0]), load(i, names[i][1])
			return lx > 5_500 && lx < 8_500 && ly > 22_000 && ly < 28_000
		})
	}
}

// A fleet whose listeners ask for TLS with their own CA and for basic auth
// (web_config_file, which /peer/fast is behind too): with peer_client's CA
// and credentials, a daemon adds its peer's readings; a wrong password
// (password_file is read at each ask) leaves the peer out, said once, with
// the 401 and no secret; the right one back adds it again; a reload
// without the CA leaves it out for the certificate.
func TestPeersBehindTLSAndBasicAuth(t *testing.T) {
	hs := testenv.StartTwoBalancers(t, [2]int{1000, 4000})
	ca := testenv.TestCA(t)
	const user, password, wrong = "peer", "s3cretPeerPW", "wr0ngPeerPW"
	web := webConfigFile(t, ca, user, password)
	pwFile := filepath.Join(t.TempDir(), "peer.pw")
	require.NoError(t, os.WriteFile(pwFile, []byte(password+"\n"), 0o600))

	// B serves its readings behind the web configuration.
	portB := testenv.FreePort(t)
	var logB testenv.SyncBuffer
	nB := &recordingNotifier{ready: make(chan struct{})}
	cfgB := parsePeerConfig(t, hs[1].Socket, fmt.Sprintf("listen: 127.0.0.1:%d\nweb_config_file: %s\ninterval: 500ms\n", portB, web))
	startDaemon(t, New(cfgB, Options{Registry: prometheus.NewRegistry(), Notifier: nB,
		Log: slog.New(slog.NewTextHandler(&logB, &slog.HandlerOptions{Level: slog.LevelDebug}))}), nB)

	// A asks B with the CA and the credentials; its reload drops the CA.
	// Its interval leaves each ask a second (half of it), well beyond a
	// TLS handshake and a bcrypt check under the race detector: a timeout
	// between two 401s would be a change, and a line, of its own.
	const intervalA = 2 * time.Second
	peer := fmt.Sprintf("https://127.0.0.1:%d", portB)
	yml := func(tlsConfig string) string {
		return fmt.Sprintf("listen: 127.0.0.1:%d\ninterval: %s\npeers: [%q]\npeer_client:\n  basic_auth: {username: %s, password_file: %s}\n%s",
			testenv.FreePort(t), intervalA, peer, user, pwFile, tlsConfig)
	}
	cfgA := parsePeerConfig(t, hs[0].Socket, yml("  tls_config: {ca_file: "+ca.CA+"}\n"))
	var mu sync.Mutex
	next := cfgA
	reg := prometheus.NewRegistry()
	var logA testenv.SyncBuffer
	nA := &recordingNotifier{ready: make(chan struct{})}
	a := startDaemon(t, New(cfgA, Options{Registry: reg, Notifier: nA,
		Log: slog.New(slog.NewTextHandler(&logA, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Reload: func() (*config.Config, error) {
			mu.Lock()
			defer mu.Unlock()
			return next, nil
		}}), nA)
	up := func() float64 {
		return testenv.Gauge(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": peer})
	}
	leftOut := func() int {
		return strings.Count(logA.String(), `msg="peer left out of the fast signal" peer=`+peer+" ")
	}

	testenv.WaitFor(t, "A adds B's readings", func() bool {
		return up() == 1 && testenv.Gauge(t, reg, "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"}) == 1
	})
	testenv.WaitFor(t, "A weighs by both balancers' load", func() bool {
		l := testenv.Gauge(t, reg, "haproxy_weighter_server_load", map[string]string{"backend": "be", "server": "s1"})
		return l > 20_000 && l < 30_000 // 10 kB/s of its own, 40 kB/s of B's, over two connections
	})
	assert.Zero(t, leftOut(), "added from the first ask:\n%s", logA.String())

	require.NoError(t, os.WriteFile(pwFile, []byte(wrong+"\n"), 0o600))
	testenv.WaitFor(t, "A leaves B out", func() bool { return up() == 0 })
	time.Sleep(3 * peers.TimingFor(intervalA).Poll) // more asks, refused alike
	assert.Equal(t, 1, leftOut(), "one line for the change:\n%s", logA.String())
	assert.Contains(t, logA.String(), `reason="down: HTTP 401 Unauthorized: the peer refused peer_client's credentials"`)

	require.NoError(t, os.WriteFile(pwFile, []byte(password+"\n"), 0o600))
	testenv.WaitFor(t, "A adds B again", func() bool { return up() == 1 })

	mu.Lock()
	next = parsePeerConfig(t, hs[0].Socket, yml(""))
	next.Listen = cfgA.Listen
	mu.Unlock()
	a.hup <- os.Interrupt
	testenv.WaitFor(t, "A leaves B out without the CA", func() bool {
		return up() == 0 && strings.Contains(logA.String(), "certificate signed by unknown authority")
	})
	// One line for the new reason; on a loaded machine the first ask of the
	// reloaded poller may time out first, a change of its own, said too.
	assert.GreaterOrEqual(t, leftOut(), 2, logA.String())
	assert.LessOrEqual(t, leftOut(), 3, logA.String())
	assert.Equal(t, 1, strings.Count(logA.String(), "certificate signed by unknown authority"), "said once:\n%s", logA.String())

	all := logA.String() + logB.String() + testenv.Exposition(t, reg)
	for _, secret := range []string{password, wrong, base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
		base64.StdEncoding.EncodeToString([]byte(user + ":" + wrong))} {
		assert.NotContains(t, all, secret, "no log line nor metric shows a password")
	}
}

// A reload whose peer_client cannot be built (its CA file is gone) is
// refused: the daemon keeps asking its peers as before.
func TestReloadWithABrokenPeerClientIsRefused(t *testing.T) {
	ca := testenv.TestCA(t)
	peer := testenv.ServePeer(t, "30")
	cfg := func(caFile string) *config.Config {
		c := testConfig(t, "be")
		c.Listen, c.Peers = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), []string{peer}
		c.PeerClient.HTTP.TLSConfig.CAFile = caFile
		return c
	}
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	n := &recordingNotifier{ready: make(chan struct{})}
	r := startDaemon(t, New(cfg(ca.CA), Options{Registry: reg, Notifier: n, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Reload: func() (*config.Config, error) { return cfg("/nonexistent/ca.pem"), nil }}), n)
	testenv.WaitFor(t, "the peer added", func() bool {
		return testenv.Gauge(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": peer}) == 1
	})
	r.hup <- os.Interrupt
	testenv.WaitFor(t, "the reload refused", func() bool { return strings.Contains(logs.String(), "config reload rejected") })
	assert.Contains(t, logs.String(), "peer "+peer+": client: peer_client: unable to read CA cert")
	assert.Equal(t, 0.0, testenv.Gauge(t, reg, "haproxy_weighter_config_reload_success", nil))
	assert.Equal(t, 1.0, testenv.Gauge(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": peer}), "still asked as before")
}

// A daemon with a peer that hangs, one that trickles its answer and one
// that answers: a reload that removes them stops their pollers and lets go
// of their connections while asks are in flight, and so does the stop of
// a daemon that still has peers. Nothing is left running.
func TestPeerPollersEndOnReloadAndStop(t *testing.T) {
	baseConns := goroutinesIn("net/http.(*persistConn)")
	entered := make(chan struct{}, 100)
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	trickle := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		fmt.Fprint(w, `{"instance":"trickle",`)
		for r.Context().Err() == nil {
			fmt.Fprint(w, " ")
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		}
	}))
	t.Cleanup(trickle.Close)
	good := testenv.ServePeer(t, "10")

	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+`
backend be
  server s1 127.0.0.1:1 weight 100
`)
	withPeers := peerConfig(t, h.Socket, testenv.FreePort(t), 1)
	withPeers.Peers = []string{hang.URL, trickle.URL, good}
	withPeers.Interval = duration.Duration(4 * time.Second) // timeout 2 s: asks stay in flight
	without := *withPeers
	without.Peers = nil
	var next atomic.Pointer[config.Config]
	next.Store(&without)
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(withPeers, Options{Registry: prometheus.NewRegistry(), Notifier: n,
		Reload: func() (*config.Config, error) { return next.Load(), nil }})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "asks in flight", func() bool { return len(entered) >= 2 })
	require.Equal(t, 3, goroutinesIn("peers.(*Set).poll"))

	r.hup <- os.Interrupt
	testenv.WaitFor(t, "the reload to stop the pollers and close their connections", func() bool {
		return goroutinesIn("peers.(*Set).poll") == 0 && goroutinesIn("net/http.(*persistConn)") <= baseConns
	})

	next.Store(withPeers)
	r.hup <- os.Interrupt
	testenv.WaitFor(t, "the peers back", func() bool { return goroutinesIn("peers.(*Set).poll") == 3 && len(entered) >= 4 })
	require.NoError(t, r.stop())
	assert.Equal(t, 0, goroutinesIn("peers.(*Set).poll"), "pollers after the daemon stopped")
	testenv.WaitFor(t, "the stopped daemon's peer connections closed", func() bool {
		return goroutinesIn("net/http.(*persistConn)") <= baseConns
	})
}

// The fleet's one configuration on every balancer: each daemon lists every
// daemon, itself included, and the other twice (with and without a
// trailing /). Over two real HAProxies, each daemon adds the other once and
// itself never: it weighs by both balancers' load, not by its own twice nor
// the other's twice (A's clients send 10 kB/s per connection, B's 40 kB/s:
// 25 kB/s summed; 30 kB/s with B's counted twice, 20 kB/s with A's).
func TestFleetConfigListingItselfAndAPeerTwice(t *testing.T) {
	hs := testenv.StartTwoBalancers(t, [2]int{1000, 4000})
	ports := [2]int{testenv.FreePort(t), testenv.FreePort(t)}
	url := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", ports[i]) }
	var regs [2]*prometheus.Registry
	var logs [2]*testenv.SyncBuffer
	for i := range hs {
		regs[i], logs[i] = prometheus.NewRegistry(), &testenv.SyncBuffer{}
		n := &recordingNotifier{ready: make(chan struct{})}
		cfg := parsePeerConfig(t, hs[i].Socket, fmt.Sprintf("listen: 127.0.0.1:%d\ninterval: 500ms\npeers: [%q, %q, %q, %q]\n",
			ports[i], url(0), url(1), url(0)+"/", url(1)+"/"))
		d := New(cfg, Options{Registry: regs[i], Notifier: n, Log: slog.New(slog.NewTextHandler(logs[i], nil))})
		startDaemon(t, d, n)
	}
	for i := range hs {
		testenv.WaitFor(t, fmt.Sprintf("daemon %d adds the other", i), func() bool {
			return testenv.Gauge(t, regs[i], "haproxy_weighter_peer_up", map[string]string{"peer": url(1 - i)}) == 1 &&
				testenv.Gauge(t, regs[i], "haproxy_weighter_peer_up", map[string]string{"peer": url(1-i) + "/"}) == 1
		})
		for _, s := range []string{"s1", "s2"} {
			testenv.WaitFor(t, fmt.Sprintf("daemon %d sees both balancers' load on %s, once each", i, s), func() bool {
				l := testenv.Gauge(t, regs[i], "haproxy_weighter_server_load", map[string]string{"backend": "be", "server": s})
				return l > 22_500 && l < 27_500
			})
		}
		assert.Equal(t, 1.0, testenv.Gauge(t, regs[i], "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"}))
		assert.Equal(t, 0.0, testenv.Gauge(t, regs[i], "haproxy_weighter_peer_up", map[string]string{"peer": url(i)}), "itself")
		// Once per URL it is listed under; on a loaded machine an ask of
		// itself may time out in between, a change said too (and back).
		n := strings.Count(logs[i].String(), `reason="this daemon itself"`)
		assert.True(t, n >= 2 && n <= 4, "itself said once per URL it is listed under (%d):\n%s", n, logs[i].String())
	}
}

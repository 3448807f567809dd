package daemon

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

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

// parsePeerConfig parses a daemon's configuration: yml's top-level keys and
// backend be, read from HAProxy's socket.
func parsePeerConfig(t *testing.T, socket, yml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "peer.yml"), []byte(yml+"haproxy: {socket: "+socket+"}\n"+
		"backends:\n  - name: be\n    source: {haproxy: {counter: bytes_in}}\n"), nil)
	require.NoError(t, err)
	return cfg
}

// gathered is the registry's metrics as the exposition format shows them.
func gathered(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, mf := range mfs {
		_, err := expfmt.MetricFamilyToText(&b, mf)
		require.NoError(t, err)
	}
	return b.String()
}

// A fleet whose listeners ask for TLS with their own CA and for basic auth
// (web_config_file, which /peer/fast is behind too): with peer_client's CA
// and credentials, a daemon adds its peer's readings; a wrong password
// (password_file is read at each ask) leaves the peer out, said once, with
// the 401 and no secret; the right one back adds it again; a reload
// without the CA leaves it out for the certificate.
func TestPeersBehindTLSAndBasicAuth(t *testing.T) {
	hs := twoBalancers(t, [2]int{1000, 4000})
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
	up := func() float64 { return series(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": peer}) }
	leftOut := func() int {
		return strings.Count(logA.String(), `msg="peer left out of the fast signal" peer=`+peer+" ")
	}

	waitFor(t, "A adds B's readings", func() bool {
		return up() == 1 && series(t, reg, "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"}) == 1
	})
	waitFor(t, "A weighs by both balancers' load", func() bool {
		l := series(t, reg, "haproxy_weighter_server_load", map[string]string{"backend": "be", "server": "s1"})
		return l > 20_000 && l < 30_000 // 10 kB/s of its own, 40 kB/s of B's, over two connections
	})
	assert.Zero(t, leftOut(), "added from the first ask:\n%s", logA.String())

	require.NoError(t, os.WriteFile(pwFile, []byte(wrong+"\n"), 0o600))
	waitFor(t, "A leaves B out", func() bool { return up() == 0 })
	time.Sleep(3 * timingFor(intervalA).Poll) // more asks, refused alike
	assert.Equal(t, 1, leftOut(), "one line for the change:\n%s", logA.String())
	assert.Contains(t, logA.String(), `why="down: HTTP 401 Unauthorized: the peer refused peer_client's credentials"`)

	require.NoError(t, os.WriteFile(pwFile, []byte(password+"\n"), 0o600))
	waitFor(t, "A adds B again", func() bool { return up() == 1 })

	mu.Lock()
	next = parsePeerConfig(t, hs[0].Socket, yml(""))
	next.Listen = cfgA.Listen
	mu.Unlock()
	a.hup <- os.Interrupt
	waitFor(t, "A leaves B out without the CA", func() bool {
		return up() == 0 && strings.Contains(logA.String(), "certificate signed by unknown authority")
	})
	assert.Equal(t, 2, leftOut(), logA.String())

	all := logA.String() + logB.String() + gathered(t, reg)
	for _, secret := range []string{password, wrong, base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
		base64.StdEncoding.EncodeToString([]byte(user + ":" + wrong))} {
		assert.NotContains(t, all, secret, "no log line nor metric shows a password")
	}
}

// Without peer_client, a peer behind basic auth is left out with the 401
// and what to do about it.
func TestPeerAskingForCredentialsSaysSo(t *testing.T) {
	locked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(locked.Close)
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	set.set(ctx, []string{locked.URL}, 400*time.Millisecond)
	waitFor(t, "the peer asked", func() bool {
		_, note := set.readings("be", false)
		return strings.Contains(note, locked.URL+": down: HTTP 401 Unauthorized: the peer asks for credentials (its web_config_file): set them in peer_client")
	})
}

// A peer's answer is bounded: a redirect to another origin (which would
// take the credentials along) is not followed, one within the peer's is;
// an answer beyond 4 MiB is garbage, not read whole.
func TestPeerRedirectsAndSizeAreBounded(t *testing.T) {
	answer := `{"instance":"other","backends":{"be":{"age_seconds":0.1,"span_seconds":1,` +
		`"servers":{"s1":{"bytes_per_second":30,"sessions":1}}}}}`
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, answer)
	}))
	t.Cleanup(elsewhere.Close)
	redirect := func(to func(r *http.Request) string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/moved" {
				fmt.Fprint(w, answer)
				return
			}
			http.Redirect(w, r, to(r), http.StatusFound)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	away := redirect(func(*http.Request) string { return elsewhere.URL + PeerPath })
	within := redirect(func(*http.Request) string { return "/moved" })
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, answer+strings.Repeat(" ", peerMaxBody))
	}))
	t.Cleanup(huge.Close)

	reg := prometheus.NewRegistry()
	set := newPeerSet(reg, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	// An 8 s interval gives each ask 4 s: reading the 4 MiB answer under -race on
	// a loaded machine can take longer than a short interval's half.
	set.set(ctx, []string{away, within, huge.URL}, 8*time.Second)
	waitFor(t, "every peer asked", func() bool {
		_, note := set.readings("be", false)
		return !strings.Contains(note, "not asked yet")
	})
	got, note := set.readings("be", false)
	require.Len(t, got, 1, note)
	assert.Equal(t, within, got[0].peer)
	assert.Contains(t, note, away+`: down: Get "`+elsewhere.URL+PeerPath+`": redirected to `+elsewhere.URL+": not followed")
	assert.Contains(t, note, huge.URL+": garbage: an answer over 4 MiB")
}

// peerProxyChild marks the test process that TestPeersIgnoreTheEnvironmentsProxy
// starts with a dead proxy in its environment.
const peerProxyChild = "HAPROXY_WEIGHTER_PEER_PROXY_CHILD"

// HTTP_PROXY in the daemon's environment (pointing at a proxy that is down)
// does not reach the peers, as it does not reach the sources: only
// peer_client's proxy_from_environment sends them through it. In a child
// process, since net/http reads the environment's proxy once per process;
// the peer at a non-loopback address, since loopback never goes through one.
func TestPeersIgnoreTheEnvironmentsProxy(t *testing.T) {
	if os.Getenv(peerProxyChild) == "" {
		dead := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
		cmd := exec.Command(os.Args[0], "-test.run=^TestPeersIgnoreTheEnvironmentsProxy$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), peerProxyChild+"=1", "HTTP_PROXY="+dead, "http_proxy="+dead,
			"HTTPS_PROXY="+dead, "https_proxy="+dead, "NO_PROXY=", "no_proxy=")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "--- PASS: TestPeersIgnoreTheEnvironmentsProxy", "%s", out)
		return
	}
	ip := nonLoopbackIPv4(t)
	peer := fmt.Sprintf("http://%s:%d", ip, testenv.FreePort(t))
	cfgB := testConfig(t, "be")
	cfgB.Listen = strings.TrimPrefix(peer, "http://")
	nB := &recordingNotifier{ready: make(chan struct{})}
	startDaemon(t, New(cfgB, Options{Registry: prometheus.NewRegistry(), Notifier: nB, Log: slog.New(slog.DiscardHandler)}), nB)

	cfgA := testConfig(t, "be")
	cfgA.Listen, cfgA.Peers = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), []string{peer}
	reg := prometheus.NewRegistry()
	nA := &recordingNotifier{ready: make(chan struct{})}
	startDaemon(t, New(cfgA, Options{Registry: reg, Notifier: nA, Log: slog.New(slog.DiscardHandler)}), nA)
	waitFor(t, "A reads B past the dead proxy", func() bool {
		return series(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": peer}) == 1
	})

	// The same peer through the environment's proxy, asked for: down.
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	h := config.DefaultPeerClient().HTTP
	h.ProxyFromEnvironment = true
	set.useClient(h)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	set.set(ctx, []string{peer}, 400*time.Millisecond)
	waitFor(t, "the proxied ask fails at the proxy", func() bool {
		_, note := set.readings("be", false)
		return strings.Contains(note, peer+": down: ") && strings.Contains(note, "proxyconnect")
	})
}

// nonLoopbackIPv4 is an address of this host that is not loopback.
func nonLoopbackIPv4(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	t.Fatal("no non-loopback IPv4 address on this host: the test needs one to show a proxy is not used")
	return nil
}

// The pollers start again with new peer_client settings, and only then: a
// reload that leaves them as they were keeps each peer's state.
func TestPeerSetRestartsOnANewClient(t *testing.T) {
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	peers := []string{"http://127.0.0.1:1"} // nothing listens: down, which is fine here
	assert.True(t, set.set(ctx, peers, time.Second))
	set.useClient(config.DefaultPeerClient().HTTP)
	assert.False(t, set.set(ctx, peers, time.Second), "the defaults, as before")
	h := config.DefaultPeerClient().HTTP
	h.BasicAuth = &promconfig.BasicAuth{Username: "peer", PasswordFile: "/etc/haproxy-weighter/peer.password"}
	set.useClient(h)
	assert.True(t, set.set(ctx, peers, time.Second), "credentials to send")
	h2 := config.DefaultPeerClient().HTTP
	h2.BasicAuth = &promconfig.BasicAuth{Username: "peer", PasswordFile: "/etc/haproxy-weighter/peer.password"}
	set.useClient(h2)
	assert.False(t, set.set(ctx, peers, time.Second), "the same settings, decoded again")
}

// A reload whose peer_client cannot be built (its CA file is gone) is
// refused: the daemon keeps asking its peers as before.
func TestReloadWithABrokenPeerClientIsRefused(t *testing.T) {
	ca := testenv.TestCA(t)
	peer := servePeer(t, "30")
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
	waitFor(t, "the peer added", func() bool {
		return series(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": peer}) == 1
	})
	r.hup <- os.Interrupt
	waitFor(t, "the reload refused", func() bool { return strings.Contains(logs.String(), "config reload rejected") })
	assert.Contains(t, logs.String(), "peer "+peer+": client: peer_client: unable to read CA cert")
	assert.Equal(t, 0.0, series(t, reg, "haproxy_weighter_config_reload_success", nil))
	assert.Equal(t, 1.0, series(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": peer}), "still asked as before")
}

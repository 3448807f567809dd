package peers

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
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promconfig "github.com/prometheus/common/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// Without peer_client, a peer behind basic auth is left out with the 401
// and what to do about it.
func TestPeerAskingForCredentialsSaysSo(t *testing.T) {
	locked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(locked.Close)
	set := newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	set.Poll(ctx, []string{locked.URL}, 400*time.Millisecond)
	testenv.WaitFor(t, "the peer asked", func() bool {
		_, note := set.readings("be", false)
		return strings.Contains(note, locked.URL+": down: HTTP 401 Unauthorized: the peer asks for credentials (its web_config_file): set them in peer_client")
	})
}

// A peer that echoes what it was sent (a debugging endpoint behind the
// peer's address, a proxy's error page) puts peer_client's credentials in
// its garbage, which why it is left out quotes: they must not reach the log
// nor the plan.
func TestPeerEchoingCredentialsShowsNoSecret(t *testing.T) {
	const user, password = "peer", "s3cretPeerPW"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Basic ")
		raw, _ := base64.StdEncoding.DecodeString(auth)
		fmt.Fprintf(w, `{"instance":"echo","backends":{"be":{"age_seconds":0.1,"span_seconds":1,`+
			`"servers":{%q:{"bytes_per_second":-1,"sessions":1},%q:{"bytes_per_second":-1}}}}}`, auth, raw)
	}))
	t.Cleanup(srv.Close)
	var logs testenv.SyncBuffer
	set := newSet(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
	h := config.DefaultPeerClient().HTTP
	h.BasicAuth = &promconfig.BasicAuth{Username: user, Password: password}
	set.UseClient(h)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	set.Poll(ctx, []string{srv.URL}, 400*time.Millisecond)
	testenv.WaitFor(t, "the peer left out", func() bool {
		_, note := set.readings("be", false)
		return strings.Contains(note, "garbage")
	})
	_, note := set.readings("be", false)
	for _, secret := range []string{password, base64.StdEncoding.EncodeToString([]byte(user + ":" + password))} {
		assert.NotContains(t, note+logs.String(), secret)
	}
}

// The pollers start again with new peer_client settings, and only then: a
// reload that leaves them as they were keeps each peer's state.
func TestPeerSetRestartsOnANewClient(t *testing.T) {
	set := newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	peers := []string{"http://127.0.0.1:1"} // nothing listens: down, which is fine here
	assert.True(t, set.Poll(ctx, peers, time.Second))
	set.UseClient(config.DefaultPeerClient().HTTP)
	assert.False(t, set.Poll(ctx, peers, time.Second), "the defaults, as before")
	h := config.DefaultPeerClient().HTTP
	h.BasicAuth = &promconfig.BasicAuth{Username: "peer", PasswordFile: "/etc/haproxy-weighter/peer.password"}
	set.UseClient(h)
	assert.True(t, set.Poll(ctx, peers, time.Second), "credentials to send")
	h2 := config.DefaultPeerClient().HTTP
	h2.BasicAuth = &promconfig.BasicAuth{Username: "peer", PasswordFile: "/etc/haproxy-weighter/peer.password"}
	set.UseClient(h2)
	assert.False(t, set.Poll(ctx, peers, time.Second), "the same settings, decoded again")
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
	// B serves its readings at an address of this host that is not loopback.
	ip := nonLoopbackIPv4(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	require.NoError(t, err)
	b := httptest.NewUnstartedServer(newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler)))
	b.Listener.Close()
	b.Listener = ln
	b.Start()
	t.Cleanup(b.Close)
	peer := b.URL

	// A asks B with peer_client's defaults, as a daemon does.
	reg := prometheus.NewRegistry()
	a := newSet(reg, slog.New(slog.DiscardHandler))
	a.UseClient(config.DefaultPeerClient().HTTP)
	actx, acancel := context.WithCancel(context.Background())
	t.Cleanup(func() { acancel(); a.Stop() })
	a.Poll(actx, []string{peer}, 2*time.Second)
	testenv.WaitFor(t, "A reads B past the dead proxy", func() bool {
		return testenv.Gauge(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": peer}) == 1
	})

	// The same peer through the environment's proxy, asked for: down.
	set := newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	h := config.DefaultPeerClient().HTTP
	h.ProxyFromEnvironment = true
	set.UseClient(h)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	set.Poll(ctx, []string{peer}, 400*time.Millisecond)
	testenv.WaitFor(t, "the proxied ask fails at the proxy", func() bool {
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

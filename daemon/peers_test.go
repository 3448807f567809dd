package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// twoBalancers starts two real HAProxies in front of the same two sinks, each
// with backend be (leastconn, s1 and s2), and opens clients through each: one
// per server, uploading perClient[i] bytes every 100 ms on balancer i.
func twoBalancers(t *testing.T, perClient [2]int) [2]*testenv.HAProxy {
	t.Helper()
	s1, s2 := testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)
	var out [2]*testenv.HAProxy
	for i := range out {
		front := testenv.FreePort(t)
		out[i] = testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  balance leastconn
  server s1 %s weight 100
  server s2 %s weight 100
`, front, s1, s2))
		for range 2 { // leastconn puts one on each server
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", front))
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			_, err = c.Write([]byte{0})
			require.NoError(t, err)
			time.Sleep(50 * time.Millisecond) // one at a time, so leastconn spreads them
			testenv.WriteEvery(t, c, perClient[i], 100*time.Millisecond)
		}
	}
	return out
}

func peerConfig(t *testing.T, socket string, listen int, peer int) *config.Config {
	t.Helper()
	yml := fmt.Sprintf("listen: 127.0.0.1:%d\ninterval: 500ms\npeers: [\"http://127.0.0.1:%d\"]\nhaproxy: {socket: %s}\n"+
		"backends:\n  - name: be\n    source: {haproxy: {counter: bytes_in}}\n", listen, peer, socket)
	cfg, err := config.Parse("peer.yml", []byte(yml), nil)
	require.NoError(t, err)
	return cfg
}

// series returns the value of name with the given labels, NaN when absent.
func series(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metric
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	return math.NaN()
}

// Two balancers in front of the same servers, each with its own daemon, the
// daemons peering over loopback: each weighs by the sum of both balancers'
// traffic. Balancer A's clients send 1 kB every 100 ms, B's 4 kB: alone, A's
// daemon sees 10 kB/s per connection and B's 40 kB/s; summed, both see the
// servers' 25 kB/s per connection.
func TestTwoDaemonsWeighByBothBalancers(t *testing.T) {
	hs := twoBalancers(t, [2]int{1000, 4000})
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
		waitFor(t, fmt.Sprintf("daemon %d adds its peer", i), func() bool {
			return series(t, regs[i], "haproxy_weighter_peer_up", map[string]string{"peer": peer}) == 1 &&
				series(t, regs[i], "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"}) == 1
		})
	}
	for i := range hs {
		for _, s := range []string{"s1", "s2"} {
			waitFor(t, fmt.Sprintf("daemon %d sees both balancers' load on %s", i, s), func() bool {
				l := series(t, regs[i], "haproxy_weighter_server_load", map[string]string{"backend": "be", "server": s})
				return l > 20_000 && l < 30_000
			})
		}
		assert.Contains(t, logs[i].String(), "peer readings added to the fast signal")
	}
}

// recordingReader is a LocalReader that keeps what the reader it wraps returned.
type recordingReader struct {
	inner weighter.LocalReader
	last  weighter.LocalRead
}

func (r *recordingReader) ReadLocal(ctx context.Context, servers []string) (weighter.LocalRead, error) {
	got, err := r.inner.ReadLocal(ctx, servers)
	r.last = got
	return got, err
}

// The peered reader over a real HAProxy adds exactly what the peer serves
// over HTTP: per server, its rate and sessions to the reader's own, its rate
// over the reader's own span to the byte counter.
func TestPeeredReaderAddsWhatThePeerServes(t *testing.T) {
	hs := twoBalancers(t, [2]int{1000, 4000})
	var sets [2]*peerSet
	var readers [2]*peeredReader
	var own [2]*recordingReader
	var urls [2]string
	for i, h := range hs {
		client, err := haproxy.New(haproxy.Config{Socket: h.Socket})
		require.NoError(t, err)
		sets[i] = newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
		srv := httptest.NewServer(sets[i])
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
		own[i] = &recordingReader{inner: newLocalReader(client.Backend("be"), weighter.BytesIn)}
		readers[i] = newPeeredReader(own[i], "be", sets[i])
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); sets[0].stop(); sets[1].stop() })
	sets[0].set(ctx, []string{urls[1]}, 2*time.Second)

	servers := []string{"s1", "s2"}
	for i, r := range readers { // until each has a rate (dumps are at least 1 s apart)
		waitFor(t, fmt.Sprintf("a rate on balancer %d", i), func() bool {
			_, err := r.ReadLocal(ctx, servers)
			require.NoError(t, err)
			time.Sleep(100 * time.Millisecond)
			return !own[i].last.Since.IsZero()
		})
	}
	// The poller has B's newest reading once B's own answer says so.
	var served peerAnswer
	waitFor(t, "the poller to fetch B's newest reading", func() bool {
		a, err := sets[0].ask(ctx, sets[0].peers[urls[1]], time.Second)
		if err != nil {
			return false
		}
		got, _ := sets[0].readings("be", false)
		if len(got) != 1 {
			return false
		}
		served = *a
		for _, s := range servers {
			if got[0].servers[s] != a.Backends["be"].Servers[s] {
				return false
			}
		}
		return true
	})
	before, err := readers[0].ReadLocal(ctx, servers)
	require.NoError(t, err)
	ownBefore := own[0].last
	waitFor(t, "A's next dump", func() bool {
		time.Sleep(100 * time.Millisecond)
		got, err := own[0].inner.ReadLocal(ctx, servers)
		require.NoError(t, err)
		return got.At.After(ownBefore.At)
	})
	got, err := readers[0].ReadLocal(ctx, servers)
	require.NoError(t, err)
	mine := own[0].last
	assert.Equal(t, "peers 1 of 1 added", got.Peers)
	span := got.At.Sub(got.Since).Seconds()
	for _, s := range servers {
		p := served.Backends["be"].Servers[s]
		require.Greater(t, p.BytesPerSecond, 0.0, "B's clients upload to %s", s)
		c := got.Servers[s]
		assert.InDelta(t, mine.Servers[s].Rate+p.BytesPerSecond, c.Rate, 1e-6, s)
		assert.InDelta(t, mine.Servers[s].Sessions+p.Sessions, c.Sessions, 1e-9, s)
		// The counter grows by the own bytes and the peer's rate over the span.
		assert.InDelta(t, mine.Servers[s].Bytes-ownBefore.Servers[s].Bytes+p.BytesPerSecond*span,
			c.Bytes-before.Servers[s].Bytes, 1e-3, s)
	}
}

// constReader is a LocalReader whose servers s1 and s2 carry 100 B/s over one
// session each, read at the current time.
type constReader struct{ last time.Time }

func (c *constReader) ReadLocal(context.Context, []string) (weighter.LocalRead, error) {
	now := time.Now()
	r := weighter.LocalRead{At: now, Since: c.last, Servers: map[string]weighter.LocalCounter{}}
	for _, s := range []string{"s1", "s2"} {
		r.Servers[s] = weighter.LocalCounter{Rate: 100, Sessions: 1, Reset: c.last.IsZero()}
	}
	c.last = now
	return r, nil
}

// Peers that hang, answer garbage or impossible values, fail, are this daemon
// itself or serve a stale reading are left out, each said once in the log,
// by haproxy_weighter_peer_up and in the read's note; the good peer is
// added: a read takes what the background fetches got, never asks a peer.
func TestPeerFaultsAreLeftOut(t *testing.T) {
	serve := func(body string, status int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	release, entered := make(chan struct{}), make(chan struct{}, 100)
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	reading := func(age float64, rate string) string {
		return fmt.Sprintf(`{"instance":"other","backends":{"be":{"age_seconds":%g,"span_seconds":2,`+
			`"servers":{"s1":{"bytes_per_second":%s,"sessions":2}}}}}`, age, rate)
	}
	good := serve(reading(0.5, "300"), http.StatusOK)
	garbage := serve("<html>not a daemon</html>", http.StatusOK)
	negative := serve(reading(0.5, "-1"), http.StatusOK)
	failing := serve("oops", http.StatusInternalServerError)
	stale := serve(reading(100, "300"), http.StatusOK)
	ancient := serve(reading(1e300, "300"), http.StatusOK) // beyond any time.Duration

	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	set := newPeerSet(reg, slog.New(slog.NewTextHandler(&logs, nil)))
	self := httptest.NewServer(set)
	t.Cleanup(self.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	peers := []string{good, garbage, negative, failing, stale, ancient, self.URL, hang.URL}
	set.set(ctx, peers, 400*time.Millisecond) // poll 100 ms, timeout 200 ms
	reasons := map[string]string{
		garbage:  "garbage: invalid character",
		negative: `garbage: backend "be" server "s1": -1 B/s`,
		failing:  "down: HTTP 500",
		self.URL: "this daemon itself",
		hang.URL: "down: no answer within 200ms",
	}
	up := func(u string) float64 {
		return series(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": u})
	}
	waitFor(t, "every peer asked twice and the hanging one timed out", func() bool {
		if len(entered) < 2 || up(good) != 1 {
			return false
		}
		_, note := set.readings("be", false)
		for u, why := range reasons {
			if !strings.Contains(note, u+": "+why) {
				return false
			}
		}
		// The stale peer answers: it is up, its backend's reading left out.
		return up(stale) == 1 && strings.Contains(note, stale+": stale (100s old)") &&
			strings.Contains(note, ancient+": stale (1e+300s old)")
	})
	for u := range reasons {
		assert.Equal(t, 0.0, up(u), u)
		assert.Equal(t, 1, strings.Count(logs.String(), "peer="+u+" "), "one line per change for %s:\n%s", u, logs.String())
	}
	set.readings("be", false) // again: nothing new to log
	assert.Equal(t, 1, strings.Count(logs.String(), "stale\" peer="+stale+" backend=be"), logs.String())

	r := newPeeredReader(&constReader{}, "be", set)
	_, err := r.ReadLocal(ctx, []string{"s1", "s2"})
	require.NoError(t, err)
	got, err := r.ReadLocal(ctx, []string{"s1", "s2"}) // while the hanging peer holds a request
	require.NoError(t, err)
	assert.Equal(t, 400.0, got.Servers["s1"].Rate, "own 100 + the good peer's 300")
	assert.Equal(t, 3.0, got.Servers["s1"].Sessions)
	assert.Equal(t, 100.0, got.Servers["s2"].Rate, "the good peer has no s2")
	assert.Contains(t, got.Peers, "peers 1 of 8 added (left out: ")
	assert.Equal(t, 1.0, series(t, reg, "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"}))
}

// A reload that changes the peers stops the pollers of those removed (their
// series go) and starts the new ones; the same list again changes nothing.
func TestPeerSetFollowsReloads(t *testing.T) {
	reg := prometheus.NewRegistry()
	set := newPeerSet(reg, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	a, b := "http://127.0.0.1:1", "http://127.0.0.1:2" // nothing listens: down, which is fine here
	assert.True(t, set.set(ctx, []string{a, b}, time.Second))
	assert.False(t, set.set(ctx, []string{a, b}, time.Second))
	assert.Equal(t, 0.0, series(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": a}))
	assert.True(t, set.set(ctx, []string{b}, time.Second))
	assert.True(t, math.IsNaN(series(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": a})), "a's series gone")
	_, note := set.readings("be", false)
	assert.Contains(t, note, "peers 0 of 1 added")
	assert.True(t, set.set(ctx, []string{b}, 2*time.Second), "a new interval restarts the pollers")
	assert.True(t, set.set(ctx, nil, 2*time.Second))
	got, note := set.readings("be", false)
	assert.Empty(t, got)
	assert.Empty(t, note, "no peers: nothing to say")
}

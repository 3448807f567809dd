package daemon

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promconfig "github.com/prometheus/common/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// A reload that removes every peer takes a backend's peers_added series
// with it: a dashboard must not go on showing peers added that are gone.
func TestPeersAddedGoesWithThePeers(t *testing.T) {
	reg := prometheus.NewRegistry()
	set := newPeerSet(reg, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	peer := servePeer(t, "10")
	set.set(ctx, []string{peer}, 400*time.Millisecond)
	added := func() float64 {
		return series(t, reg, "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"})
	}
	waitFor(t, "the peer added", func() bool {
		set.readings("be", false)
		return added() == 1
	})
	require.True(t, set.set(ctx, nil, 400*time.Millisecond))
	set.readings("be", false) // the next cycle
	assert.True(t, math.IsNaN(added()), "peers_added after every peer was removed: %g", added())
}

// A peer left out for the same reason at every ask, worded with other
// numbers each time (its garbage values, a connection's local port), is
// said once, not at every poll: four lines an interval per peer for as long
// as it lasts.
func TestPeerSameProblemOtherNumbersLoggedOnce(t *testing.T) {
	var asks atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := asks.Add(1)
		fmt.Fprintf(w, `{"instance":"other","backends":{"be":{"age_seconds":0.1,"span_seconds":1,`+
			`"servers":{"s1":{"bytes_per_second":-%d,"sessions":1}}}}}`, n)
	}))
	t.Cleanup(srv.Close)
	var logs testenv.SyncBuffer
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	set.set(ctx, []string{srv.URL}, 400*time.Millisecond) // poll 100 ms
	waitFor(t, "five asks", func() bool { return asks.Load() >= 5 })
	require.True(t, set.set(ctx, nil, 400*time.Millisecond))
	assert.Equal(t, 1, strings.Count(logs.String(), "peer left out"), logs.String())
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
	good := servePeer(t, "10")

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
	waitFor(t, "asks in flight", func() bool { return len(entered) >= 2 })
	require.Equal(t, 3, goroutinesIn("(*peerSet).poll"))

	r.hup <- os.Interrupt
	waitFor(t, "the reload to stop the pollers and close their connections", func() bool {
		return goroutinesIn("(*peerSet).poll") == 0 && goroutinesIn("net/http.(*persistConn)") <= baseConns
	})

	next.Store(withPeers)
	r.hup <- os.Interrupt
	waitFor(t, "the peers back", func() bool { return goroutinesIn("(*peerSet).poll") == 3 && len(entered) >= 4 })
	require.NoError(t, r.stop())
	assert.Equal(t, 0, goroutinesIn("(*peerSet).poll"), "pollers after the daemon stopped")
	waitFor(t, "the stopped daemon's peer connections closed", func() bool {
		return goroutinesIn("net/http.(*persistConn)") <= baseConns
	})
}

// A peer's garbage is quoted in why it is left out, which reaches the log
// and, each cycle, every server's reason in the plan: a server name, a
// status line or a JSON path it sends a megabyte long must not come along
// whole.
func TestPeerGarbageIsNotQuotedWhole(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	bodies := map[string]string{
		"name":  `{"instance":"other","backends":{"be":{"age_seconds":0.1,"span_seconds":1,"servers":{"` + long + `":{"bytes_per_second":-1,"sessions":1}}}}}`,
		"path":  `{"instance":"other","backends":{"` + long + `":{"servers":{"s1":{"bytes_per_second":"300"}}}}}`,
		"plain": long,
	}
	var logs testenv.SyncBuffer
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	var urls []string
	for _, body := range bodies {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	status := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// A status line as long as net/http takes.
		c, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(buf, "HTTP/1.1 500 %s\r\nContent-Length: 0\r\n\r\n", strings.Repeat("y", 1<<20))
		_ = buf.Flush()
	}))
	t.Cleanup(status.Close)
	urls = append(urls, status.URL)
	set.set(ctx, urls, 4*time.Second)
	waitFor(t, "every peer left out", func() bool {
		_, note := set.readings("be", false)
		return strings.Count(note, "garbage:")+strings.Count(note, "down: HTTP") == len(urls)
	})
	_, note := set.readings("be", false)
	assert.Less(t, len(note), 4<<10, "the plan's note: %.300s…", note)
	assert.Less(t, len(logs.String()), 8<<10, "the log: %.300s…", logs.String())
}

// A peer that flaps (answers about as slowly as the timeout, or one of two
// hosts behind its name is broken) changes at every poll: its changes are
// said a few times, then summarised, with the state it is in, not logged
// at every poll for as long as it flaps. A peer that changes now and then
// still has each change said when it happens.
func TestFlappingPeerIsSummarised(t *testing.T) {
	var asks atomic.Int64
	var settled, down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if asks.Add(1)%2 == 0 && !settled.Load() || down.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		fmt.Fprint(w, `{"instance":"other","backends":{}}`)
	}))
	t.Cleanup(srv.Close)
	var clock atomic.Int64
	epoch := time.Unix(2_000_000_000, 0)
	var logs testenv.SyncBuffer
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
	set.now = func() time.Time { return epoch.Add(time.Duration(clock.Load())) }
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	set.set(ctx, []string{srv.URL}, time.Hour) // the poller asks once, then sleeps: the test asks
	pr := set.peers[srv.URL]
	waitFor(t, "the first ask", func() bool { return asks.Load() == 1 })
	timing := timingFor(2 * time.Second)
	lines := func() int { return strings.Count(logs.String(), "peer="+srv.URL) }
	waitFor(t, "the first ask's line", func() bool { return lines() == 1 })
	for range 1319 { // a poll every 500 ms for 11 minutes, each a change
		clock.Add(int64(500 * time.Millisecond))
		set.fetch(ctx, pr, timing)
	}
	during := lines()
	assert.LessOrEqual(t, during, 12, "lines while flapping for 11 minutes (1,320 changes):\n%s", logs.String())
	assert.Contains(t, logs.String(), "changes=", "the flapping summarised")

	// It settles (answers 200 from now on): the state it ends in is said.
	settled.Store(true)
	for range 1200 { // 10 minutes
		clock.Add(int64(500 * time.Millisecond))
		set.fetch(ctx, pr, timing)
	}
	all := strings.Split(strings.TrimSpace(logs.String()), "\n")
	assert.Contains(t, all[len(all)-1], "added", "the last word is the state it settled in:\n%s", logs.String())
	assert.LessOrEqual(t, len(all)-during, 2, "lines once settled:\n%s", logs.String())

	// Down again, for good: said at the ask that finds it.
	down.Store(true)
	clock.Add(int64(500 * time.Millisecond))
	set.fetch(ctx, pr, timing)
	all = strings.Split(strings.TrimSpace(logs.String()), "\n")
	assert.Contains(t, all[len(all)-1], "peer left out", logs.String())
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
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
	h := config.DefaultPeerClient().HTTP
	h.BasicAuth = &promconfig.BasicAuth{Username: user, Password: password}
	set.useClient(h)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	set.set(ctx, []string{srv.URL}, 400*time.Millisecond)
	waitFor(t, "the peer left out", func() bool {
		_, note := set.readings("be", false)
		return strings.Contains(note, "garbage")
	})
	_, note := set.readings("be", false)
	for _, secret := range []string{password, base64.StdEncoding.EncodeToString([]byte(user + ":" + password))} {
		assert.NotContains(t, note+logs.String(), secret)
	}
}

// A peer that does not answer is said alike whichever deadline ends the
// ask, the ask's or its connection's read deadline (both half the
// interval): the two messages took turns, each a change and a log line.
func TestSilentPeerIsSaidAlikeWhicheverDeadlineEndsIt(t *testing.T) {
	silent := func(headers bool) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if headers {
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
			}
			<-r.Context().Done()
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	noAnswer, noBody := silent(false), silent(true)
	set.set(ctx, []string{noAnswer, noBody}, 400*time.Millisecond) // the connections' read deadline: 200 ms
	// Asked with a longer deadline of its own, the connection's ends it.
	_, err := set.ask(ctx, set.peers[noAnswer], 10*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "down: no answer within")
	_, err = set.ask(ctx, set.peers[noBody], 10*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "down: answer not read within")
}

// The fleet's one configuration on every balancer: each daemon lists every
// daemon, itself included, and the other twice (with and without a
// trailing /). Over two real HAProxies, each daemon adds the other once and
// itself never: it weighs by both balancers' load, not by its own twice nor
// the other's twice (A's clients send 10 kB/s per connection, B's 40 kB/s:
// 25 kB/s summed; 30 kB/s with B's counted twice, 20 kB/s with A's).
func TestFleetConfigListingItselfAndAPeerTwice(t *testing.T) {
	hs := twoBalancers(t, [2]int{1000, 4000})
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
		waitFor(t, fmt.Sprintf("daemon %d adds the other", i), func() bool {
			return series(t, regs[i], "haproxy_weighter_peer_up", map[string]string{"peer": url(1 - i)}) == 1 &&
				series(t, regs[i], "haproxy_weighter_peer_up", map[string]string{"peer": url(1-i) + "/"}) == 1
		})
		for _, s := range []string{"s1", "s2"} {
			waitFor(t, fmt.Sprintf("daemon %d sees both balancers' load on %s, once each", i, s), func() bool {
				l := series(t, regs[i], "haproxy_weighter_server_load", map[string]string{"backend": "be", "server": s})
				return l > 22_500 && l < 27_500
			})
		}
		assert.Equal(t, 1.0, series(t, regs[i], "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"}))
		assert.Equal(t, 0.0, series(t, regs[i], "haproxy_weighter_peer_up", map[string]string{"peer": url(i)}), "itself")
		assert.Equal(t, 2, strings.Count(logs[i].String(), `why="this daemon itself"`),
			"itself said once per URL it is listed under:\n%s", logs[i].String())
	}
}

// failingAfter is a LocalReader that reads like constReader until fail is
// set, then fails as an HAProxy that stopped answering does.
type failingAfter struct {
	constReader
	fail atomic.Bool
}

func (f *failingAfter) ReadLocal(ctx context.Context, servers []string) (weighter.LocalRead, error) {
	if f.fail.Load() {
		return weighter.LocalRead{}, errors.New("admin socket: connection refused")
	}
	return f.constReader.ReadLocal(ctx, servers)
}

// A backend whose own fast read fails adds no peer's reading (it weighs by
// its source alone): peers_added says 0, not the count of its last good
// read.
func TestPeersAddedIsZeroWhenTheOwnReadFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	set := newPeerSet(reg, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	set.set(ctx, []string{servePeer(t, "10")}, 400*time.Millisecond)
	own := &failingAfter{}
	r := newPeeredReader(own, "be", set)
	added := func() float64 {
		return series(t, reg, "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"})
	}
	waitFor(t, "the peer added", func() bool {
		_, err := r.ReadLocal(ctx, []string{"s1"})
		require.NoError(t, err)
		return added() == 1
	})
	own.fail.Store(true)
	_, err := r.ReadLocal(ctx, []string{"s1"})
	require.Error(t, err)
	assert.Equal(t, 0.0, added())
}

// A reading over a long span (the peer's first dump after its HAProxy was
// unreachable for an hour spans the hour; a lying peer says any span) is
// not fresh for twice that span: ten minutes old, it is stale, not added
// for up to two hours after the peer's reads stopped again.
func TestPeerReadingOverALongSpanGoesStale(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"instance":"other","backends":{"be":{"age_seconds":600,"span_seconds":3600,`+
			`"servers":{"s1":{"bytes_per_second":300,"sessions":1}}}}}`)
	}))
	t.Cleanup(srv.Close)
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	set.set(ctx, []string{srv.URL}, 2*time.Second)
	waitFor(t, "the peer asked", func() bool {
		set.peers[srv.URL].mu.Lock()
		defer set.peers[srv.URL].mu.Unlock()
		return set.peers[srv.URL].answer != nil
	})
	got, note := set.readings("be", false)
	assert.Empty(t, got, note)
	assert.Contains(t, note, srv.URL+": stale (600s old)")
}

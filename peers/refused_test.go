package peers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

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
	set := newSet(reg, slog.New(slog.NewTextHandler(&logs, nil)))
	self := httptest.NewServer(set)
	t.Cleanup(self.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	peers := []string{good, garbage, negative, failing, stale, ancient, self.URL, hang.URL}
	set.Poll(ctx, peers, 400*time.Millisecond) // poll 100 ms, timeout 200 ms
	reasons := map[string]string{
		garbage:  "garbage: invalid character",
		negative: `garbage: backend "be" server "s1": -1 B/s`,
		failing:  "down: HTTP 500",
		self.URL: "this daemon itself",
		hang.URL: "down: no answer within 200ms",
	}
	up := func(u string) float64 {
		return testenv.Gauge(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": u})
	}
	testenv.WaitFor(t, "every peer asked twice and the hanging one timed out", func() bool {
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

	r := NewReader(&constReader{}, "be", set)
	_, err := r.ReadLocal(ctx, testenv.Servers("s1", "s2"))
	require.NoError(t, err)
	got, err := r.ReadLocal(ctx, testenv.Servers("s1", "s2")) // while the hanging peer holds a request
	require.NoError(t, err)
	assert.Equal(t, 400.0, got.Servers["s1"].Rate, "own 100 + the good peer's 300")
	assert.Equal(t, 3.0, got.Servers["s1"].Sessions)
	assert.Equal(t, 100.0, got.Servers["s2"].Rate, "the good peer has no s2")
	assert.Contains(t, got.Peers, "peers 1 of 8 added (left out: ")
	assert.Equal(t, 1.0, testenv.Gauge(t, reg, "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"}))
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
	away := redirect(func(*http.Request) string { return elsewhere.URL + Path })
	within := redirect(func(*http.Request) string { return "/moved" })
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, answer+strings.Repeat(" ", maxBody))
	}))
	t.Cleanup(huge.Close)

	reg := prometheus.NewRegistry()
	set := newSet(reg, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	// An 8 s interval gives each ask 4 s: reading the 4 MiB answer under -race on
	// a loaded machine can take longer than a short interval's half.
	set.Poll(ctx, []string{away, within, huge.URL}, 8*time.Second)
	testenv.WaitFor(t, "every peer asked", func() bool {
		_, note := set.readings("be", false)
		return !strings.Contains(note, "not asked yet")
	})
	got, note := set.readings("be", false)
	require.Len(t, got, 1, note)
	assert.Equal(t, within, got[0].peer)
	assert.Contains(t, note, away+`: down: Get "`+elsewhere.URL+Path+`": redirected to `+elsewhere.URL+": not followed")
	assert.Contains(t, note, huge.URL+": garbage: an answer over 4 MiB")
}

// A peer claiming an absurd rate (beyond any server's) is garbage, left
// out: added to the byte counter it would swamp the own bytes for good (a
// float64 beside 1e300 no longer counts them), and the calibration with it.
func TestPeerAbsurdRateIsLeftOut(t *testing.T) {
	set := newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	huge := testenv.ServePeer(t, "1e300")
	set.Poll(ctx, []string{huge}, 400*time.Millisecond)
	testenv.WaitFor(t, "the peer asked", func() bool {
		set.peers[huge].mu.Lock()
		defer set.peers[huge].mu.Unlock()
		return set.peers[huge].problem != "not asked yet"
	})
	r := NewReader(&growingReader{}, "be", set)
	var reads []weighter.LocalRead
	for range 3 {
		got, err := r.ReadLocal(ctx, testenv.Servers("s1"))
		require.NoError(t, err)
		reads = append(reads, got)
	}
	assert.Contains(t, reads[2].Peers, "garbage")
	assert.Equal(t, 1000.0, reads[2].Servers["s1"].Rate)
	assert.Equal(t, 1000.0, reads[2].Servers["s1"].Bytes-reads[1].Servers["s1"].Bytes, "the own bytes still count")
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
	set := newSet(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
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
	set.Poll(ctx, urls, 4*time.Second)
	// Four megabytes decoded under -race on a loaded machine: longer than WaitFor's 10 s.
	testenv.WaitWithin(t, time.Minute, "every peer left out", func() bool {
		_, note := set.readings("be", false)
		return strings.Count(note, "garbage:")+strings.Count(note, "down: HTTP") == len(urls)
	})
	_, note := set.readings("be", false)
	assert.Less(t, len(note), 4<<10, "the plan's note: %.300s…", note)
	assert.Less(t, len(logs.String()), 8<<10, "the log: %.300s…", logs.String())
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
	set := newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	noAnswer, noBody := silent(false), silent(true)
	set.Poll(ctx, []string{noAnswer, noBody}, 400*time.Millisecond) // the connections' read deadline: 200 ms
	// Asked with a longer deadline of its own, the connection's ends it.
	_, err := set.ask(ctx, set.peers[noAnswer], 10*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "down: no answer within")
	_, err = set.ask(ctx, set.peers[noBody], 10*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "down: answer not read within")
}

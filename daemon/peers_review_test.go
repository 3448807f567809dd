package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// servePeer serves a peer answer for backend be with server s1 at rate B/s.
func servePeer(t *testing.T, rate string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"instance":"other","backends":{"be":{"age_seconds":0.1,"span_seconds":1,`+
			`"servers":{"s1":{"bytes_per_second":%s,"sessions":1}}}}}`, rate)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A cycle reads its peers' readings while a reload changes the peers: the
// two must not race on the set of peers.
func TestPeerReadingsDuringReload(t *testing.T) {
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	a, b := servePeer(t, "10"), servePeer(t, "20")
	set.set(ctx, []string{a}, 400*time.Millisecond)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				set.readings("be", false)
			}
		}
	}()
	for i := range 50 {
		if i%2 == 0 {
			set.set(ctx, []string{a, b}, 400*time.Millisecond)
		} else {
			set.set(ctx, []string{a}, 400*time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
}

// growingReader is a LocalReader whose server s1 moves 1,000 bytes between
// two reads, a second apart.
type growingReader struct {
	n    int
	last time.Time
}

func (g *growingReader) ReadLocal(context.Context, []string) (weighter.LocalRead, error) {
	g.n++
	at := time.Unix(1_000_000+int64(g.n), 0)
	r := weighter.LocalRead{At: at, Since: g.last, Servers: map[string]weighter.LocalCounter{
		"s1": {Bytes: float64(1000 * g.n), Rate: 1000, Sessions: 1, Reset: g.last.IsZero()}}}
	g.last = at
	return r, nil
}

// A peer claiming an absurd rate (beyond any server's) is garbage, left
// out: added to the byte counter it would swamp the own bytes for good (a
// float64 beside 1e300 no longer counts them), and the calibration with it.
func TestPeerAbsurdRateIsLeftOut(t *testing.T) {
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	huge := servePeer(t, "1e300")
	set.set(ctx, []string{huge}, 400*time.Millisecond)
	waitFor(t, "the peer asked", func() bool {
		set.peers[huge].mu.Lock()
		defer set.peers[huge].mu.Unlock()
		return set.peers[huge].problem != "not asked yet"
	})
	r := newPeeredReader(&growingReader{}, "be", set)
	var reads []weighter.LocalRead
	for range 3 {
		got, err := r.ReadLocal(ctx, []string{"s1"})
		require.NoError(t, err)
		reads = append(reads, got)
	}
	assert.Contains(t, reads[2].Peers, "garbage")
	assert.Equal(t, 1000.0, reads[2].Servers["s1"].Rate)
	assert.Equal(t, 1000.0, reads[2].Servers["s1"].Bytes-reads[1].Servers["s1"].Bytes, "the own bytes still count")
}

// countingReader is growingReader's IPVS twin: its signal counts
// connections (Rate is s1's mean open connections).
type countingReader struct{ growingReader }

func (c *countingReader) ReadLocal(ctx context.Context, servers []string) (weighter.LocalRead, error) {
	r, err := c.growingReader.ReadLocal(ctx, servers)
	r.Counts = true
	return r, err
}

// A peer's reading is added only in the own signal's unit: an HAProxy
// balancer's bytes/s added to an IPVS service's connection counts (or the
// reverse) would swamp or vanish beside them.
func TestPeerReadingInAnotherUnitIsLeftOut(t *testing.T) {
	serve := func(connections bool) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, `{"instance":"other","backends":{"be":{"age_seconds":0.1,"span_seconds":1,"connections":%t,`+
				`"servers":{"s1":{"bytes_per_second":30,"sessions":1}}}}}`, connections)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	bytesPeer, connPeer := serve(false), serve(true)
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	set.set(ctx, []string{bytesPeer, connPeer}, 400*time.Millisecond)
	waitFor(t, "both peers asked", func() bool {
		_, note := set.readings("be", false)
		return !strings.Contains(note, "not asked yet")
	})
	for _, tc := range []struct {
		own          weighter.LocalReader
		added, other string
	}{
		{&growingReader{}, bytesPeer, connPeer},
		{&countingReader{}, connPeer, bytesPeer},
	} {
		r := newPeeredReader(tc.own, "be", set)
		var got weighter.LocalRead
		for range 2 {
			var err error
			got, err = r.ReadLocal(ctx, []string{"s1"})
			require.NoError(t, err)
		}
		assert.Equal(t, 1030.0, got.Servers["s1"].Rate, "own 1000 + one peer's 30")
		assert.Contains(t, got.Peers, "peers 1 of 2 added (left out: "+tc.other+": backend be counts ")
	}
	// What a daemon publishes says its unit.
	for _, counts := range []bool{false, true} {
		own := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
		own.publish("be", weighter.LocalRead{At: time.Now(), Since: time.Now().Add(-time.Second), Counts: counts,
			Servers: map[string]weighter.LocalCounter{"s1": {Rate: 5}}}, nil)
		rec := httptest.NewRecorder()
		own.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PeerPath, nil))
		var a peerAnswer
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a))
		assert.Equal(t, counts, a.Backends["be"].Connections)
	}
}

// One daemon listed twice (its URL with and without a trailing /, or its
// name and its address) is added once: its traffic counted twice would
// weigh its servers as twice as loaded.
func TestPeerListedTwiceIsAddedOnce(t *testing.T) {
	peer := servePeer(t, "30")
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	set.set(ctx, []string{peer, peer + "/"}, 400*time.Millisecond)
	waitFor(t, "both URLs asked", func() bool {
		_, note := set.readings("be", false)
		return !strings.Contains(note, "not asked yet")
	})
	r := newPeeredReader(&growingReader{}, "be", set)
	var got weighter.LocalRead
	for range 2 {
		var err error
		got, err = r.ReadLocal(ctx, []string{"s1"})
		require.NoError(t, err)
	}
	assert.Equal(t, 1030.0, got.Servers["s1"].Rate, "own 1000 + the peer's 30, once")
	assert.Equal(t, "peers 1 of 2 added (left out: "+peer+"/: the same daemon as "+peer+")", got.Peers)
}

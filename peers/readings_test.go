package peers

import (
	"context"
	"encoding/json"
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
	set := newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	set.Poll(ctx, []string{srv.URL}, 2*time.Second)
	testenv.WaitFor(t, "the peer asked", func() bool {
		set.peers[srv.URL].mu.Lock()
		defer set.peers[srv.URL].mu.Unlock()
		return set.peers[srv.URL].answer != nil
	})
	got, note := set.readings("be", false)
	assert.Empty(t, got, note)
	assert.Contains(t, note, srv.URL+": stale (600s old)")
}

// One daemon listed twice (its URL with and without a trailing /, or its
// name and its address) is added once: its traffic counted twice would
// weigh its servers as twice as loaded.
func TestPeerListedTwiceIsAddedOnce(t *testing.T) {
	peer := testenv.ServePeer(t, "30")
	set := newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	set.Poll(ctx, []string{peer, peer + "/"}, 400*time.Millisecond)
	testenv.WaitFor(t, "both URLs asked", func() bool {
		_, note := set.readings("be", false)
		return !strings.Contains(note, "not asked yet")
	})
	r := NewReader(&growingReader{}, "be", set)
	var got weighter.LocalRead
	for range 2 {
		var err error
		got, err = r.ReadLocal(ctx, testenv.Servers("s1"))
		require.NoError(t, err)
	}
	assert.Equal(t, 1030.0, got.Servers["s1"].Rate, "own 1000 + the peer's 30, once")
	assert.Equal(t, "peers 1 of 2 added (left out: "+peer+"/: the same daemon as "+peer+")", got.Peers)
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
	set := newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	set.Poll(ctx, []string{bytesPeer, connPeer}, 400*time.Millisecond)
	testenv.WaitFor(t, "both peers asked", func() bool {
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
		r := NewReader(tc.own, "be", set)
		var got weighter.LocalRead
		for range 2 {
			var err error
			got, err = r.ReadLocal(ctx, testenv.Servers("s1"))
			require.NoError(t, err)
		}
		assert.Equal(t, 1030.0, got.Servers["s1"].Rate, "own 1000 + one peer's 30")
		assert.Contains(t, got.Peers, "peers 1 of 2 added (left out: "+tc.other+": backend be counts ")
	}
	// What a daemon publishes says its unit.
	for _, counts := range []bool{false, true} {
		own := newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
		own.publish("be", weighter.LocalRead{At: time.Now(), Since: time.Now().Add(-time.Second), Counts: counts,
			Servers: map[string]weighter.LocalCounter{"s1": {Rate: 5}}}, nil)
		rec := httptest.NewRecorder()
		own.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path, nil))
		var a answer
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a))
		assert.Equal(t, counts, a.Backends["be"].Connections)
	}
}

package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
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

package peers

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// A reload that changes the peers stops the pollers of those removed (their
// series go) and starts the new ones; the same list again changes nothing.
func TestPeerSetFollowsReloads(t *testing.T) {
	reg := prometheus.NewRegistry()
	set := newSet(reg, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	a, b := "http://127.0.0.1:1", "http://127.0.0.1:2" // nothing listens: down, which is fine here
	assert.True(t, set.Poll(ctx, []string{a, b}, time.Second))
	assert.False(t, set.Poll(ctx, []string{a, b}, time.Second))
	assert.Equal(t, 0.0, testenv.Gauge(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": a}))
	assert.True(t, set.Poll(ctx, []string{b}, time.Second))
	assert.True(t, math.IsNaN(testenv.Gauge(t, reg, "haproxy_weighter_peer_up", map[string]string{"peer": a})), "a's series gone")
	_, note := set.readings("be", false)
	assert.Contains(t, note, "peers 0 of 1 added")
	assert.True(t, set.Poll(ctx, []string{b}, 2*time.Second), "a new interval restarts the pollers")
	assert.True(t, set.Poll(ctx, nil, 2*time.Second))
	got, note := set.readings("be", false)
	assert.Empty(t, got)
	assert.Empty(t, note, "no peers: nothing to say")
}

// A cycle reads its peers' readings while a reload changes the peers: the
// two must not race on the set of peers.
func TestPeerReadingsDuringReload(t *testing.T) {
	set := newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	a, b := testenv.ServePeer(t, "10"), testenv.ServePeer(t, "20")
	set.Poll(ctx, []string{a}, 400*time.Millisecond)
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
			set.Poll(ctx, []string{a, b}, 400*time.Millisecond)
		} else {
			set.Poll(ctx, []string{a}, 400*time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
}

// A reload that removes every peer takes a backend's peers_added series
// with it: a dashboard must not go on showing peers added that are gone.
func TestPeersAddedGoesWithThePeers(t *testing.T) {
	reg := prometheus.NewRegistry()
	set := newSet(reg, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	peer := testenv.ServePeer(t, "10")
	set.Poll(ctx, []string{peer}, 400*time.Millisecond)
	added := func() float64 {
		return testenv.Gauge(t, reg, "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"})
	}
	testenv.WaitFor(t, "the peer added", func() bool {
		set.readings("be", false)
		return added() == 1
	})
	require.True(t, set.Poll(ctx, nil, 400*time.Millisecond))
	set.readings("be", false) // the next cycle
	assert.True(t, math.IsNaN(added()), "peers_added after every peer was removed: %g", added())
}

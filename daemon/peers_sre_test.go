package daemon

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

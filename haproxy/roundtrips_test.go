package haproxy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestStatsSourceOneShowStatPerCycle runs whole cycles with `source: haproxy`
// against a real HAProxy and counts what reaches its socket: the target's
// Servers read (`show servers state` + `show stat`) also feeds the source, so
// a cycle sends one `show stat`, in one round trip with the state, plus the
// round trip of the write when weights change. Without the hand-over it sent
// two `show stat` in three round trips.
func TestStatsSourceOneShowStatPerCycle(t *testing.T) {
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
backend be
  balance leastconn
  server s1 %s weight 10
  server s2 %s weight 10
`, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)))
	client, err := New(Config{Socket: h.Socket})
	require.NoError(t, err)
	var mu sync.Mutex
	var trips [][]string
	client.trace = func(cmds []string) {
		mu.Lock()
		defer mu.Unlock()
		trips = append(trips, cmds)
	}
	be := client.Backend("be")
	src, err := NewStatsSource(StatsConfig{Counter: CounterCurrentSessions}, "be", be, nil)
	require.NoError(t, err)
	ctl, err := weighter.NewController(weighter.DefaultPolicy())
	require.NoError(t, err)
	b := &weighter.Weigher{Name: "be", Source: src, Target: be, Controller: ctl}

	for cycle := range 3 {
		mu.Lock()
		trips = nil
		mu.Unlock()
		c := weighter.RunCycle(context.Background(), b, time.Now(), true)
		require.NoError(t, c.Err, "cycle %d", cycle)
		mu.Lock()
		shows, writes := 0, 0
		for _, cmds := range trips {
			for _, cmd := range cmds {
				shows += strings.Count(cmd, "show stat ")
			}
			if strings.HasPrefix(cmds[0], "set server") {
				writes++
			}
		}
		t.Logf("cycle %d: %d round trips (%d writing), %d show stat", cycle, len(trips), writes, shows)
		assert.Equal(t, 1, shows, "cycle %d: show stat commands: %v", cycle, trips)
		assert.Equal(t, 1+writes, len(trips), "cycle %d: round trips: %v", cycle, trips)
		mu.Unlock()
	}

	// A read that is not the cycle's own (older than a cycle's two calls)
	// is not handed over: the source reads again.
	_, err = be.Servers(context.Background())
	require.NoError(t, err)
	now := be.now
	be.now = func() time.Time { return now().Add(2 * statsReuseMaxAge) }
	mu.Lock()
	trips = nil
	mu.Unlock()
	_, err = src.Fetch(context.Background(), nil)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, trips, 1, "a stale hand-over must not be used")
	assert.Contains(t, trips[0][0], "show stat")
}

package weighter

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// configured returns servers at the configured weight 1 whose open
// connections are open.
func configured(open ...int) []ServerState {
	ones := make([]int, len(open))
	for i := range ones {
		ones[i] = 1
	}
	return withSessions(ones, open...)
}

// resetController is a Controller that wrote 200, 100, 50 and then found
// HAProxy holding the configured 1, 1, 1 again.
func resetController(t *testing.T) *Controller {
	t.Helper()
	p := DefaultPolicy()
	c := mustController(t, p)
	c.Commit([]Change{{"s1", 200}, {"s2", 100}, {"s3", 50}})
	return c
}

// TestSettleKeepsTheConfiguredWeightsWhileClientsReconnect: after a reset
// nothing is written while the open connections climb (a reconnect storm:
// 30, 90, 170, 238 of 240), and the weights come back the cycle after they
// stopped climbing, shared out from the configured ones.
func TestSettleKeepsTheConfiguredWeightsWhileClientsReconnect(t *testing.T) {
	c := resetController(t)
	loads := func(at time.Time) Loads { return loadsAt(at, 10, 20, 40) }
	storm := [][]int{{10, 10, 10}, {30, 30, 30}, {57, 57, 56}, {80, 79, 79}}
	for k, open := range storm {
		now := t0.Add(time.Duration(2*k) * time.Second)
		plan := c.Plan(now, loads(now), configured(open...))
		assert.Equal(t, k == 0, plan.Reset, "cycle %d", k)
		require.True(t, plan.Settling, "cycle %d: open %v", k, open)
		assert.Empty(t, plan.Changes(), "cycle %d", k)
		for _, sp := range plan.Servers {
			assert.Equal(t, ActionKeep, sp.Action, sp.Server)
			assert.Equal(t, 1, sp.New, sp.Server)
			assert.Contains(t, sp.Reason, ReasonSettling, sp.Server)
		}
	}
	now := t0.Add(8 * time.Second)
	plan := c.Plan(now, loads(now), configured(80, 80, 80)) // +2: steady
	assert.False(t, plan.Settling)
	assert.NotEmpty(t, plan.Changes())
	s := byServer(plan)
	assert.Greater(t, s["s1"].New, s["s2"].New)
	assert.Greater(t, s["s2"].New, s["s3"].New)
	// max_step counts from the configured weights (⅓ each), not the old ones
	sum := float64(s["s1"].New + s["s2"].New + s["s3"].New)
	assert.GreaterOrEqual(t, float64(s["s3"].New)/sum, 1.0/6-0.01)
	assert.Less(t, float64(s["s3"].New)/sum, 1.0/3)
}

// TestSettleEndsAfterSettleMax: clients that keep arriving (a reload whose
// new worker fills slowly) do not hold the weights for ever.
func TestSettleEndsAfterSettleMax(t *testing.T) {
	c := resetController(t)
	cycles := 0
	for k := 0; ; k++ {
		now := t0.Add(time.Duration(2*k) * time.Second)
		open := 10 * (k + 1) // +30 a cycle, far above 5 %
		plan := c.Plan(now, loadsAt(now, 10, 20, 40), configured(open, open, open))
		if !plan.Settling {
			assert.GreaterOrEqual(t, now.Sub(t0), settleMax)
			assert.NotEmpty(t, plan.Changes())
			break
		}
		cycles++
		require.Less(t, cycles, 100, "still settling")
	}
	assert.Equal(t, int(settleMax/(2*time.Second)), cycles)
}

// TestSettleOnlyAfterAReset: an ordinary growth of the open connections
// (clients arriving at a running HAProxy) never keeps the weights.
func TestSettleOnlyAfterAReset(t *testing.T) {
	c := mustController(t, DefaultPolicy())
	servers := configured(0, 0, 0)
	for k, open := range []int{0, 30, 90, 170, 240} {
		now := t0.Add(time.Duration(2*k) * time.Second)
		for i := range servers {
			servers[i].Sessions = open / 3
		}
		plan := c.Plan(now, loadsAt(now, 10, 20, 40), servers)
		assert.False(t, plan.Settling, "cycle %d", k)
		apply(c, plan, servers)
	}
}

// TestSettleHoldForNoData: a reset found while the source has no data is a
// hold (the coverage guard), and settling still begins: the next cycle with
// data but clients still arriving keeps the configured weights.
func TestSettleHoldForNoData(t *testing.T) {
	c := resetController(t)
	plan := c.Plan(t0, Loads{}, configured(10, 10, 10))
	assert.True(t, plan.Hold)
	assert.True(t, plan.Reset)
	now := t0.Add(2 * time.Second)
	plan = c.Plan(now, loadsAt(now, 10, 20, 40), configured(40, 40, 40))
	assert.False(t, plan.Hold)
	assert.True(t, plan.Settling)
	assert.Empty(t, plan.Changes())
}

// TestSettleProperty: over random backends, resets and open connections, a
// settling plan never writes, and settling never lasts past settleMax after
// the reset that began it.
func TestSettleProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 7))
	settled, resets := 0, 0
	for trial := 0; trial < 300; trial++ {
		n := 2 + rng.IntN(10)
		c := mustController(t, DefaultPolicy())
		servers := up(make([]int, n)...)
		for i := range servers {
			servers[i].Weight = 1
		}
		var resetAt time.Time
		for k := 0; k < 60; k++ {
			now := t0.Add(time.Duration(2*k) * time.Second)
			vals := make([]float64, n)
			for i := range vals {
				vals[i] = randomValue(rng, 100)
				servers[i].Sessions = rng.IntN(50) * (k + 1) / (1 + rng.IntN(3))
			}
			if rng.IntN(20) == 0 { // HAProxy restarts: every weight back to 1
				for i := range servers {
					servers[i].Weight = 1
				}
			}
			plan := c.Plan(now, loadsAt(now, vals...), servers)
			if plan.Reset {
				resetAt = now
				resets++
			}
			if plan.Settling {
				settled++
				require.Empty(t, plan.Changes(), "trial %d cycle %d", trial, k)
				require.False(t, resetAt.IsZero(), "settling without a reset: trial %d cycle %d", trial, k)
				require.Less(t, now.Sub(resetAt), settleMax, "trial %d cycle %d", trial, k)
			}
			apply(c, plan, servers)
		}
	}
	// the property is not vacuous: resets happened, and settling past them
	t.Logf("%d resets, %d settling cycles", resets, settled)
	require.Greater(t, settled, resets)
}

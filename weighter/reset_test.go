package weighter

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlanStartsAgainAfterHAProxyResetsEveryWeight: a restarted (or reloaded)
// HAProxy holds every server at its configured weight; the old weights were
// fitted to connections it no longer counts, so the plan is measured from the
// weights HAProxy holds, as at start-up, not from the ones written before.
func TestPlanStartsAgainAfterHAProxyResetsEveryWeight(t *testing.T) {
	p := free()
	p.MaxStep, p.Deadband = 2, 0
	c := mustController(t, p)
	c.Commit([]Change{{"s1", 100}, {"s2", 200}, {"s3", 256}})
	// every weight back to the configuration's 1: kept for the cycle that
	// found it (its read spans the restart), then, the open connections
	// steady, wanted: 256, 128, 64
	first := c.Plan(t0, loadsAt(t0, 10, 20, 40), up(1, 1, 1))
	assert.True(t, first.Reset)
	assert.True(t, first.Settling)
	assert.Empty(t, first.Changes())
	for _, sp := range first.Servers {
		assert.Contains(t, sp.Reason, ReasonReset, sp.Server)
		assert.Contains(t, sp.Reason, ReasonSettling, sp.Server)
	}
	plan := c.Plan(t0.Add(2e9), loadsAt(t0.Add(2e9), 10, 20, 40), up(1, 1, 1))
	assert.False(t, plan.Reset)
	assert.False(t, plan.Settling)
	s := byServer(plan)
	sum := float64(s["s1"].New + s["s2"].New + s["s3"].New)
	for _, name := range []string{"s1", "s2", "s3"} {
		assert.Equal(t, ActionSet, s[name].Action, name)
		assert.NotContains(t, s[name].Reason, ReasonReapply, name)
		// shares measured from 1, 1, 1 (⅓ each): within [⅙, ⅔] up to rounding
		share := float64(s[name].New) / sum
		assert.GreaterOrEqual(t, share, 1.0/6-0.01, name)
		assert.LessOrEqual(t, share, 2.0/3+0.01, name)
	}
	// s3's share falls from ⅓ by at most max_step: not to the 64/448 (0.14)
	// it would reach from the old 256-of-556, and s1 leads
	assert.InDelta(t, 1.0/6, float64(s["s3"].New)/sum, 0.01)
	assert.Greater(t, s["s1"].New, s["s2"].New)
	assert.Greater(t, s["s2"].New, s["s3"].New)

	// the next cycle, with the plan written, is an ordinary one
	servers := up(1, 1, 1)
	apply(c, plan, servers)
	next := c.Plan(t0.Add(5e9), loadsAt(t0, 10, 20, 40), servers)
	assert.False(t, next.Settling)
	assert.False(t, next.Reset)
	for _, sp := range next.Servers {
		assert.NotContains(t, sp.Reason, ReasonReset, sp.Server)
	}
}

// TestResetNeedsEveryWeightAtTheConfiguration: one weight set back by hand, or
// every weight set to something else, is changed outside and set back.
func TestResetNeedsEveryWeightAtTheConfiguration(t *testing.T) {
	p := free()
	p.MaxStep, p.Deadband = 2, 0
	cases := map[string][]ServerState{
		"one of three at its configured weight": up(256, 1, 64),
		"every weight set to another value":     up(7, 7, 7),
	}
	for what, servers := range cases {
		t.Run(what, func(t *testing.T) {
			c := mustController(t, p)
			c.Commit([]Change{{"s1", 256}, {"s2", 128}, {"s3", 64}})
			plan := c.Plan(t0, loadsAt(t0, 10, 20, 40), servers)
			assert.False(t, plan.Reset)
			for _, sp := range plan.Servers {
				if sp.Current != map[string]int{"s1": 256, "s2": 128, "s3": 64}[sp.Server] {
					assert.Equal(t, ActionSet, sp.Action, sp.Server)
					assert.True(t, strings.HasPrefix(sp.Reason, ReasonReapply), "%s: %s", sp.Server, sp.Reason)
				}
			}
		})
	}
	// a target that reports no configured weight (0): never a reset
	c := mustController(t, p)
	c.Commit([]Change{{"s1", 256}, {"s2", 128}})
	servers := up(1, 1)
	for i := range servers {
		servers[i].InitialWeight = 0
	}
	require.False(t, c.Plan(t0, loadsAt(t0, 10, 20), servers).Reset)
}

package weighter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// apply sets the servers' weights to the plan's and commits its changes.
func apply(c *Controller, plan Plan, servers []ServerState) {
	for i, s := range plan.Servers {
		servers[i].Weight = s.New
	}
	c.Commit(plan.Changes())
}

// TestFeedbackIntegratesEachPointOnce: a 5 s interval over 10 s data sees every
// point twice; the second look must not move the weights again.
func TestFeedbackIntegratesEachPointOnce(t *testing.T) {
	p := free()
	p.Function = "feedback"
	c := mustController(t, p)
	servers := up(256, 256)
	first := c.Plan(t0, loadsAt(t0, 10, 40), servers)
	// m = 25: 256·(25/10)^0.5 = 404.8, 256·(25/40)^0.5 = 202.4; rescaled to 256, 128
	assert.Equal(t, []int{256, 128}, []int{first.Servers[0].New, first.Servers[1].New})
	apply(c, first, servers)

	again := c.Plan(t0.Add(5*time.Second), loadsAt(t0, 10, 40), servers)
	for _, s := range again.Servers {
		assert.Equal(t, ActionKeep, s.Action, s.Server)
		assert.Equal(t, ReasonNoNewData, s.Reason, s.Server)
		assert.Equal(t, s.Current, s.New, s.Server)
	}
	assert.Empty(t, again.Changes())

	next := t0.Add(10 * time.Second)
	moved := c.Plan(next, loadsAt(next, 10, 40), servers)
	// the same error integrated once more: 256·(25/10)^0.5 = 404.8 and
	// 128·(25/40)^0.5 = 101.2, rescaled by 256/404.8: 256, 64
	assert.Equal(t, []int{256, 64}, []int{moved.Servers[0].New, moved.Servers[1].New})
}

// TestFeedbackTrailingNullIsNoNewData: Graphite returns buckets up to now, the
// newest null; a null point newer than the last valid one brings no data.
func TestFeedbackTrailingNullIsNoNewData(t *testing.T) {
	p := free()
	p.Function = "feedback"
	c := mustController(t, p)
	servers := up(256, 256)
	apply(c, c.Plan(t0, loadsAt(t0, 10, 40), servers), servers)
	later := t0.Add(10 * time.Second)
	loads := loadsAt(t0, 10, 40)
	for name, s := range loads {
		loads[name] = append(s, Point{Time: later, Value: nan})
	}
	plan := c.Plan(later, loads, servers)
	assert.Empty(t, plan.Changes())
	assert.Equal(t, ReasonNoNewData, plan.Servers[1].Reason)
}

// TestFeedbackStaleStillReapplies: a weight reset behind our back (reload) is
// set back to what we wrote even when there is no new data to integrate.
func TestFeedbackStaleStillReapplies(t *testing.T) {
	p := free()
	p.Function = "feedback"
	c := mustController(t, p)
	servers := up(256, 256)
	apply(c, c.Plan(t0, loadsAt(t0, 10, 40), servers), servers)
	require.Equal(t, 128, servers[1].Weight)
	servers[1].Weight = 1 // HAProxy reloaded
	plan := c.Plan(t0.Add(5*time.Second), loadsAt(t0, 10, 40), servers)
	assert.Equal(t, []Change{{Server: "s2", Weight: 128}}, plan.Changes())
	assert.Equal(t, ReasonReapply+"; "+ReasonNoNewData, plan.Servers[1].Reason)
}

// TestStatelessFunctionsIgnoreFreshness: limited-proportions maps the same
// data to the same weights, so it recomputes whether or not the data is new.
func TestStatelessFunctionsIgnoreFreshness(t *testing.T) {
	c := mustController(t, free())
	servers := up(256, 256)
	apply(c, c.Plan(t0, loadsAt(t0, 10, 40), servers), servers)
	require.Equal(t, []int{256, 64}, []int{servers[0].Weight, servers[1].Weight})
	servers[1].Weight = 200
	c.Commit([]Change{{Server: "s2", Weight: 200}}) // as if another policy had written it
	plan := c.Plan(t0.Add(5*time.Second), loadsAt(t0, 10, 40), servers)
	assert.Equal(t, []Change{{Server: "s2", Weight: 64}}, plan.Changes())
}

// TestFeedbackUndatedPointsCountAsNew: a source without timestamps (usable with
// max_age 0 only) still integrates.
func TestFeedbackUndatedPointsCountAsNew(t *testing.T) {
	p := free()
	p.Function, p.MaxAge = "feedback", 0
	c := mustController(t, p)
	servers := up(256, 256)
	apply(c, c.Plan(t0, loadsAt(time.Time{}, 10, 40), servers), servers)
	plan := c.Plan(t0.Add(5*time.Second), loadsAt(time.Time{}, 10, 40), servers)
	assert.Equal(t, []int{256, 64}, []int{plan.Servers[0].New, plan.Servers[1].New})
}

package weighter

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withSessions sets each server's open connections (HAProxy's scur).
func withScur(servers []ServerState, sessions ...int) []ServerState {
	for i := range servers {
		servers[i].Sessions = sessions[i]
	}
	return servers
}

// burst places n new connections one by one as HAProxy's weighted
// leastconn does (lowest (active+1)/weight, compared exactly; ties to the
// first listed) over the plan's weights and the servers' open connections,
// and returns how many each server took.
func burst(plan Plan, servers []ServerState, n int) map[string]int {
	active := map[string]int{}
	weight := map[string]int{}
	for _, s := range servers {
		active[s.Name] = s.Sessions
	}
	for _, sp := range plan.Servers {
		weight[sp.Server] = sp.New
	}
	took := map[string]int{}
	for range n {
		best := ""
		for _, s := range servers {
			w := weight[s.Name]
			if w <= 0 {
				continue
			}
			// (a+1)/w < (b+1)/v  ⇔  (a+1)·v < (b+1)·w
			if best == "" || (active[s.Name]+1)*weight[best] < (active[best]+1)*w {
				best = s.Name
			}
		}
		if best == "" {
			break
		}
		active[best]++
		took[best]++
	}
	return took
}

// The herding: s5 is light, every server carries 30 connections;
// the default weights give s5 the next connections in a row, so a burst of
// three heavy clients all lands on it. With max_run 1 it takes at most two
// before the others take one each.
func TestMaxRunStopsTheHerd(t *testing.T) {
	servers := withScur(up(100, 100, 100, 100, 100, 100, 100, 100), 30, 30, 30, 30, 30, 30, 30, 30)
	loads := loadsAt(t0, 100, 100, 100, 100, 50, 100, 100, 100)
	run := func(h float64) map[string]int {
		p := DefaultPolicy()
		p.MaxRun = h
		c := mustController(t, p)
		plan := c.Plan(t0, loads, servers)
		require.False(t, plan.Hold, plan.Reason)
		return burst(plan, servers, 3)
	}
	assert.Equal(t, 3, run(0)["s5"], "without the bound the burst herds onto s5")
	got := run(1)
	assert.LessOrEqual(t, got["s5"], 2, "%v", got)
	p := DefaultPolicy()
	p.MaxRun = 1
	plan := mustController(t, p).Plan(t0, loads, servers)
	assert.Contains(t, byServer(plan)["s5"].Reason, ReasonMaxRun)
}

// TestMaxRunBoundProperty: over random backends (2-16 servers, 0-200 open
// connections each, random loads with missing ones, random weights) and
// random bounds, for several cycles committing what was planned, a burst of
// n arrivals placed by leastconn over the written weights never gives a
// server i more than 1 + H + (n_i+1+H)/(n_ref+1) · k_ref, ref the lower
// median server in leastconn's order (by weight/(n+1)) and k_ref what it
// took; so at most 1 + H before ref takes one. A weight of 1 is exempt
// (HAProxy has none lower).
func TestMaxRunBoundProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 2026))
	for trial := range 1000 {
		p := DefaultPolicy()
		p.MaxRun = []float64{0.5, 1, 2, 4, 8}[rng.IntN(5)]
		p.Deadband = rng.IntN(4)
		if rng.IntN(3) == 0 {
			p.RunChurn = float64(rng.IntN(20))
		}
		c := mustController(t, p)
		n := 2 + rng.IntN(15)
		weights := make([]int, n)
		for i := range weights {
			weights[i] = 1 + rng.IntN(256)
		}
		servers := up(weights...)
		for cycle := range 8 {
			vals := make([]float64, n)
			for i := range servers {
				servers[i].Sessions = rng.IntN(201)
				vals[i] = rng.Float64()*1000 + 1
				if rng.IntN(10) == 0 {
					vals[i] = nan
				}
			}
			now := t0.Add(timeStep(cycle))
			plan := c.Plan(now, loadsAt(now, vals...), servers)
			if plan.Hold {
				continue
			}
			h := c.runs.h
			require.GreaterOrEqual(t, h, p.MaxRun)
			checkRunBound(t, fmt.Sprintf("trial %d cycle %d H %g", trial, cycle, h), plan, servers, h, 1+rng.IntN(60))
			c.Commit(plan.Changes())
			for i := range servers {
				servers[i].Weight = byServer(plan)[servers[i].Name].New
			}
		}
	}
}

func checkRunBound(t *testing.T, label string, plan Plan, servers []ServerState, h float64, n int) {
	t.Helper()
	weight, sessions := map[string]int{}, map[string]int{}
	for _, s := range servers {
		sessions[s.Name] = s.Sessions
	}
	type slot struct {
		name string
		r    float64
	}
	var order []slot
	for _, sp := range plan.Servers {
		weight[sp.Server] = sp.New
		if sp.New > 0 {
			order = append(order, slot{sp.Server, float64(sp.New) / float64(sessions[sp.Server]+1)})
		}
	}
	if len(order) == 0 {
		return
	}
	slices.SortStableFunc(order, func(a, b slot) int { return cmp.Compare(a.r, b.r) })
	ref := order[(len(order)-1)/2].name // the lower median in leastconn's order
	took := burst(plan, servers, n)
	for _, s := range servers {
		if weight[s.Name] <= 1 || s.Name == ref {
			continue
		}
		bound := 1 + h + (float64(sessions[s.Name]+1)+h)/float64(sessions[ref]+1)*float64(took[ref])
		if float64(took[s.Name]) > bound+1e-9 {
			for _, sp := range plan.Servers {
				t.Logf("%s n=%d cur=%d new=%d %s %s", sp.Server, sessions[sp.Server], sp.Current, sp.New, sp.Action, sp.Reason)
			}
			t.Fatalf("%s: %s (w %d, n %d) took %d of %d, bound %.2f; reference %s (w %d, n %d) took %d",
				label, s.Name, weight[s.Name], sessions[s.Name], took[s.Name], n, bound, ref, weight[ref], sessions[ref], took[ref])
		}
	}
}

// TestRunChurnFollowsArrivals: H is max_run while servers gain nothing, and
// grows with run_churn × the servers' mean gain per cycle.
func TestRunChurnFollowsArrivals(t *testing.T) {
	p := DefaultPolicy()
	p.MaxRun, p.RunChurn = 1, 10
	c := mustController(t, p)
	servers := withScur(up(100, 100, 100, 100), 10, 10, 10, 10)
	loads := func(cycle int) Loads { return loadsAt(t0.Add(timeStep(cycle)), 10, 10, 10, 10) }
	c.Plan(t0, loads(0), servers)
	c.Plan(t0.Add(timeStep(1)), loads(1), servers)
	assert.InDelta(t, 1, c.runs.h, 1e-9, "no gains: H = max_run")
	for cycle := 2; cycle < 400; cycle++ {
		for i := range servers {
			servers[i].Sessions += 2 // every server gains two a cycle
		}
		c.Plan(t0.Add(timeStep(cycle)), loads(cycle), servers)
	}
	assert.InDelta(t, 20, c.runs.h, 0.1, "two gained a cycle × 10")
	before := c.runs.h
	servers[0].Sessions += 8 // a burst of eight on one server barely moves it
	c.Plan(t0.Add(timeStep(400)), loads(400), servers)
	assert.Less(t, c.runs.h-before, 0.5)
}

func TestMaxRunValidation(t *testing.T) {
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		p := DefaultPolicy()
		p.MaxRun = bad
		assert.ErrorContains(t, p.Validate(), "max_run")
		p = DefaultPolicy()
		p.RunChurn = bad
		assert.ErrorContains(t, p.Validate(), "run_churn")
	}
}

// timeStep is the start of cycle k, 2 s apart.
func timeStep(k int) time.Duration { return time.Duration(k) * 2 * time.Second }

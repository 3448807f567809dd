package weighter

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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
// n arrivals placed by leastconn over the written weights gives a server i
// at most 1 + H + (n_i+1+H)/(n_ref+1) · k_ref, ref the lower median server
// in leastconn's order (by weight/(n+1)) and k_ref what it took (so at most
// 1 + H before ref takes one) — unless max_step is what held it there:
// its share fell by the full max_step this cycle, or writing its weight one
// lower would take another server's share above its max_step ceiling.
// Every cycle also keeps max_step. A weight of 1 is exempt (HAProxy has
// none lower), and so is a backend with fewer open connections than servers
// (the bound is not applied there: leastconn fills idle servers first).
func TestMaxRunBoundProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 2026))
	var st runStats
	for trial := range 1000 {
		p := DefaultPolicy()
		p.MaxRun = []float64{0.5, 1, 2, 4, 8}[rng.IntN(5)]
		p.Deadband = rng.IntN(4)
		p.MaxStep = []float64{1.5, 2, 4}[rng.IntN(3)]
		if rng.IntN(3) == 0 {
			p.RunChurn = float64(rng.IntN(20))
		}
		rare := rng.IntN(3) == 0
		if rare { // the bound while new connections are rare: forced, whatever these cycles gain
			p.RunRare, p.RunRareSpread = 1e300, 2+rng.IntN(4)
		}
		c := mustController(t, p)
		if rare {
			forceRare(c)
		}
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
			before := maps.Clone(c.runs.seen) // the connections at the last cycle, for the gains
			plan := c.Plan(now, loadsAt(now, vals...), servers)
			if plan.Hold {
				continue
			}
			h, rank := c.runs.h, c.runs.rank
			if rare {
				require.Equal(t, rareH, h)
				require.Equal(t, p.RunRareSpread, rank)
				require.True(t, plan.RareArrivals)
			} else {
				require.GreaterOrEqual(t, h, p.MaxRun)
				require.Zero(t, rank)
			}
			label := fmt.Sprintf("trial %d cycle %d H %g rank %d max_step %g", trial, cycle, h, rank, p.MaxStep)
			checkRunBound(t, label, p, plan, servers, allowance(h, rank, servers, before), rank, 1+rng.IntN(60), &st)
			var ms maxStepStats
			require.Empty(t, checkShareStep(p, plan, baseWeights(servers), &ms), label)
			for _, sp := range plan.Servers {
				// the solver's cap and the integers' pass may both lower a weight: said once
				require.LessOrEqual(t, strings.Count(sp.Reason, ReasonMaxRun), 1, "%s: %s", label, sp.Reason)
			}
			c.Commit(plan.Changes())
			for i := range servers {
				servers[i].Weight = byServer(plan)[servers[i].Name].New
			}
		}
	}
	t.Logf("%d bursts checked: %d servers over the bound, every one held there by max_step (%d at their max_step floor, "+
		"%d where writing it lower would put another server above its max_step ceiling)", st.bursts, st.over, st.atFloor, st.noRoom)
	require.Positive(t, st.bursts)
}

// TestMaxRunConvergesProperty: where max_step held a server over its run
// bound, the bound is reached over the following cycles. Random backends as
// in TestMaxRunBoundProperty, but with their open connections and loads
// (missing ones included) kept from cycle to cycle, so that only the weights
// move: each cycle keeps max_step, and after at most ⌈log_max_step(e)⌉+2
// cycles, e the largest factor by which a server started over its bound
// (the rounding of the start bounded by 256·201), every burst keeps the
// bound exactly, with no server left over it on any excuse.
func TestMaxRunConvergesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 2027))
	converged, spread := 0, 0
	for trial := range 300 {
		p := DefaultPolicy()
		p.MaxRun = []float64{0.5, 1, 2, 4, 8}[rng.IntN(5)]
		p.Deadband = rng.IntN(4)
		p.MaxStep = []float64{1.5, 2, 4}[rng.IntN(3)]
		// Connections that stay gain nothing: after rareWarm cycles new
		// connections are rare and the bound tightens, so each trial has
		// one bound from the start: the median's (RunRare off) or the
		// rare one's (its warm-up taken as done).
		rare := rng.IntN(2) == 0
		p.RunRare, p.RunRareSpread = 0, 2+rng.IntN(4)
		if rare {
			p.RunRare = 0.1
		}
		c := mustController(t, p)
		if rare {
			forceRare(c)
		}
		n := 2 + rng.IntN(15)
		weights, vals := make([]int, n), make([]float64, n)
		for i := range weights {
			weights[i], vals[i] = 1+rng.IntN(256), rng.Float64()*1000+1
		}
		servers := up(weights...)
		for i := range servers {
			servers[i].Sessions = rng.IntN(201)
		}
		settle := int(math.Ceil(math.Log(256*201)/math.Log(p.MaxStep))) + 2
		for cycle := range settle + 5 {
			now := t0.Add(timeStep(cycle))
			plan := c.Plan(now, loadsAt(now, vals...), servers)
			require.False(t, plan.Hold, plan.Reason)
			h, rank := p.MaxRun, 0
			if rare {
				h, rank = rareH, p.RunRareSpread
			}
			require.Equal(t, rare, plan.RareArrivals)
			label := fmt.Sprintf("trial %d cycle %d H %g rank %d max_step %g", trial, cycle, h, rank, p.MaxStep)
			var ms maxStepStats
			require.Empty(t, checkShareStep(p, plan, baseWeights(servers), &ms), label)
			if cycle >= settle {
				var st runStats
				checkRunBound(t, label, Policy{}, plan, servers, allowance(h, rank, servers, nil), rank, 1+rng.IntN(60), &st)
				require.Zero(t, st.over, "%s: a server over its bound %d cycles on", label, cycle)
				converged++
				if rare && busyServers(servers) {
					// a burst of up to the spread lands on as many servers
					k := 1 + rng.IntN(rareSpread(rank, weighted(plan)))
					for name, took := range burst(plan, servers, k) {
						require.LessOrEqual(t, took, 1, "%s: %s took %d of a burst of %d", label, name, took, k)
					}
					spread++
				}
			}
			c.Commit(plan.Changes())
			for i := range servers {
				servers[i].Weight = byServer(plan)[servers[i].Name].New
			}
		}
	}
	t.Logf("%d bursts after the weights settled, none over the bound; %d bursts of at most run_rare_spread, "+
		"each on as many servers", converged, spread)
	require.Positive(t, spread)
}

// forceRare makes c take new connections as rare from its first cycle, as
// after rareWarm cycles without a gain.
func forceRare(c *Controller) {
	c.runs.seen, c.runs.churn, c.runs.rare, c.runs.known = map[string]int{}, math.NaN(), 0, rareWarm
}

// busyServers reports whether the servers carry at least one open
// connection each on average (the bound applies).
func busyServers(servers []ServerState) bool {
	open := 0
	for _, s := range servers {
		open += s.Sessions
	}
	return open >= len(servers)
}

// weighted is how many of the plan's servers have a weight.
func weighted(plan Plan) int {
	n := 0
	for _, sp := range plan.Servers {
		if sp.New > 0 {
			n++
		}
	}
	return n
}

// rareSpread is how many servers a burst spreads over under the rare bound
// with reference rank of S weighted servers: the rank, but never past the
// lower median (the (⌊S/2⌋+1)-th most favoured).
func rareSpread(rank, servers int) int {
	return min(rank, servers/2+1)
}

// allowance is each server's H: h, less while new connections are rare
// (rank > 0) the connections it gained since the last cycle (before: each
// server's open connections then; nil or a server missing: none gained).
func allowance(h float64, rank int, servers []ServerState, before map[string]int) map[string]float64 {
	out := make(map[string]float64, len(servers))
	for _, s := range servers {
		out[s.Name] = h
		if n, ok := before[s.Name]; ok && rank > 0 {
			out[s.Name] -= float64(max(0, s.Sessions-n))
		}
	}
	return out
}

// runStats sums up the run bound's property tests.
type runStats struct {
	bursts, over, atFloor, noRoom int
}

// baseWeights is each server's weight before the cycle.
func baseWeights(servers []ServerState) map[string]int {
	out := make(map[string]int, len(servers))
	for _, s := range servers {
		out[s.Name] = s.Weight
	}
	return out
}

// checkRunBound places a burst of n arrivals by leastconn over the plan's
// weights and checks every server against the run bound; a server over it
// must be one max_step held there (stepHeld).
func checkRunBound(t *testing.T, label string, p Policy, plan Plan, servers []ServerState, hs map[string]float64, rank, n int, st *runStats) {
	t.Helper()
	weight, sessions := map[string]int{}, map[string]int{}
	open := 0
	for _, s := range servers {
		sessions[s.Name] = s.Sessions
		open += s.Sessions
	}
	if open < len(servers) {
		return // not busy: the bound is not applied
	}
	order := leastconnOrder(plan, sessions)
	if len(order) == 0 {
		return
	}
	for _, sp := range plan.Servers {
		weight[sp.Server] = sp.New
	}
	ref := order[(len(order)-1)/2] // the lower median in leastconn's order
	if rank > 0 {
		ref = order[len(order)-rareSpread(rank, len(order))] // the rank-th most favoured, never past the lower median
	}
	took := burst(plan, servers, n)
	st.bursts++
	for _, s := range servers {
		if weight[s.Name] <= 1 || s.Name == ref {
			continue
		}
		h := hs[s.Name]
		bound := 1 + h + (float64(sessions[s.Name]+1)+h)/float64(sessions[ref]+1)*float64(took[ref])
		if took[s.Name] == 0 || float64(took[s.Name]) <= bound+1e-9 { // (a bound below 0: its gains while rare)
			continue
		}
		st.over++
		if why := stepHeld(p, plan, baseWeights(servers), s.Name, st); why != "" {
			continue
		}
		for _, sp := range plan.Servers {
			t.Logf("%s n=%d cur=%d new=%d %s %s", sp.Server, sessions[sp.Server], sp.Current, sp.New, sp.Action, sp.Reason)
		}
		t.Fatalf("%s: %s (w %d, n %d) took %d of %d, bound %.2f; reference %s (w %d, n %d) took %d; max_step did not hold it there",
			label, s.Name, weight[s.Name], sessions[s.Name], took[s.Name], n, bound, ref, weight[ref], sessions[ref], took[ref])
	}
}

// leastconnOrder is the plan's servers with a weight, least favoured by
// leastconn first (highest (n+1)/w, that is lowest w/(n+1)), ties in the
// plan's order. It compares exactly, in integers.
func leastconnOrder(plan Plan, sessions map[string]int) []string {
	type slot struct {
		name string
		w, n int
	}
	var order []slot
	for _, sp := range plan.Servers {
		if sp.New > 0 {
			order = append(order, slot{sp.Server, sp.New, sessions[sp.Server]})
		}
	}
	// w_a/(n_a+1) < w_b/(n_b+1)  ⇔  w_a·(n_b+1) < w_b·(n_a+1)
	slices.SortStableFunc(order, func(a, b slot) int { return cmp.Compare(a.w*(b.n+1), b.w*(a.n+1)) })
	names := make([]string, len(order))
	for i, s := range order {
		names[i] = s.name
	}
	return names
}

// stepHeld says why max_step held server over its run bound, "" when it
// did not. On the integers written, each n standing for an exact weight in
// [n-½, n+½] (a 1 for one in (0, 1.5]), as checkShareStep reads them: its
// lowest share reaches its max_step floor, share/max_step; or, were it
// written one lower, another server's highest share would be above its
// ceiling, share·max_step (it is at its ceiling up to the rounding). A server without a weight before (resumed from a drain)
// has no share for max_step to keep: it is never held.
func stepHeld(p Policy, plan Plan, base map[string]int, over string, st *runStats) string {
	set := shareSet(plan, base)
	i := slices.IndexFunc(set, func(m shareMember) bool { return m.name == over })
	if i < 0 || p.MaxStep == 0 {
		return ""
	}
	var oldSum, lowSum, highSum float64
	for _, m := range set {
		oldSum, lowSum, highSum = oldSum+m.old, lowSum+lowExact(m.new), highSum+m.new+0.5
	}
	if m := set[i]; lowExact(m.new)/(lowExact(m.new)+highSum-(m.new+0.5)) <= m.old/oldSum/p.MaxStep*(1+1e-9) {
		st.atFloor++
		return "at its max_step floor"
	}
	for j, m := range set {
		// its highest share, were the other one lower
		highest := (m.new + 0.5) / (m.new + 0.5 + lowSum - lowExact(m.new) - 1)
		if j != i && highest > m.old/oldSum*p.MaxStep*(1-1e-12) {
			st.noRoom++
			return m.name + " at its max_step ceiling"
		}
	}
	return ""
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

// TestNthSmallest: the selection behind runReference agrees with sorting,
// duplicates included.
func TestNthSmallest(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 2000 {
		rs := make([]float64, 1+rng.IntN(40))
		for i := range rs {
			rs[i] = float64(rng.IntN(10)) / float64(1+rng.IntN(3))
		}
		k := rng.IntN(len(rs))
		sorted := slices.Sorted(slices.Values(rs))
		require.Equal(t, sorted[k], nthSmallest(slices.Clone(rs), k), "%v k=%d", rs, k)
	}
}

// settleCycles plans and commits cycles with the servers' connections and
// loads kept, as a backend of connections that stay, and returns the last
// plan.
func settleCycles(t *testing.T, c *Controller, servers []ServerState, vals []float64, cycles int) Plan {
	t.Helper()
	var plan Plan
	for cycle := range cycles {
		now := t0.Add(timeStep(cycle))
		plan = c.Plan(now, loadsAt(now, vals...), servers)
		require.False(t, plan.Hold, plan.Reason)
		c.Commit(plan.Changes())
		for i := range servers {
			servers[i].Weight = byServer(plan)[servers[i].Name].New
		}
	}
	return plan
}

// The herding once new connections are rare: hour-long connections,
// none gained for a minute, s5 light. Under the median bound (run_rare off)
// s5 takes two of a burst of three heavy clients; with the default the
// three land on three servers, and only the two servers more favoured than
// the third are capped, so the weights keep their order below it.
func TestRunRareSpreadsTheBurst(t *testing.T) {
	vals := []float64{100, 100, 100, 100, 50, 100, 100, 100}
	run := func(rare float64) (Plan, []ServerState) {
		p := DefaultPolicy()
		p.RunRare = rare
		servers := withScur(up(100, 100, 100, 100, 100, 100, 100, 100), 30, 30, 30, 30, 30, 30, 30, 30)
		return settleCycles(t, mustController(t, p), servers, vals, rareWarm+10), servers
	}
	plan, servers := run(0)
	require.False(t, plan.RareArrivals)
	assert.GreaterOrEqual(t, burst(plan, servers, 3)["s5"], 2, "the median bound lets s5 take two of three")

	plan, servers = run(DefaultPolicy().RunRare)
	require.True(t, plan.RareArrivals, "no connection gained for %d cycles: rare", rareWarm+10)
	took := burst(plan, servers, 3)
	assert.Len(t, took, 3, "a burst of three on three servers: %v", took)
	for name, n := range took {
		assert.Equal(t, 1, n, "%s: %v", name, took)
	}
	assert.Contains(t, byServer(plan)["s5"].Reason, "one in a row before the 3rd most favoured server takes one")
}

// TestRunRareCapsOnlyAboveTheReference: loads graded from light to heavy,
// equal connections. While new connections are rare only the servers more
// favoured than the run_rare_spread-th are capped; the median bound at the
// same H caps every server above the median.
func TestRunRareCapsOnlyAboveTheReference(t *testing.T) {
	vals := []float64{10, 20, 30, 40, 50, 60, 70, 80}
	capped := func(rare float64, maxRun float64) []string {
		p := DefaultPolicy()
		p.RunRare, p.MaxRun = rare, maxRun
		servers := withScur(up(100, 100, 100, 100, 100, 100, 100, 100), 30, 30, 30, 30, 30, 30, 30, 30)
		plan := settleCycles(t, mustController(t, p), servers, vals, rareWarm+10)
		require.Equal(t, rare > 0, plan.RareArrivals)
		var out []string
		for _, sp := range plan.Servers {
			if strings.Contains(sp.Reason, ReasonMaxRun) {
				out = append(out, sp.Server)
			}
		}
		return out
	}
	assert.Equal(t, []string{"s1", "s2"}, capped(0.1, 3), "rare: the two servers above the 3rd most favoured")
	assert.Equal(t, []string{"s1", "s2", "s3", "s4"}, capped(0, rareH), "the median bound: the favoured half")
}

// TestRunRareFollowsArrivals: new connections count as rare only after
// rareWarm cycles measured, while the servers gain fewer than run_rare a
// cycle on average (the EWMA over ~10 cycles); a burst does not end it,
// steady arrivals do, and it comes back about a minute after they stop.
func TestRunRareFollowsArrivals(t *testing.T) {
	c := mustController(t, DefaultPolicy())
	servers := withScur(up(100, 100, 100, 100), 10, 10, 10, 10)
	cycle := 0
	plan := func() Plan {
		now := t0.Add(timeStep(cycle))
		cycle++
		return c.Plan(now, loadsAt(now, 10, 10, 10, 10), servers)
	}
	for range rareWarm {
		require.False(t, plan().RareArrivals, "cycle %d: before the warm-up ends", cycle)
	}
	require.True(t, plan().RareArrivals, "after %d cycles without a gain", rareWarm)
	servers[0].Sessions += 3 // a burst of three on one server
	assert.True(t, plan().RareArrivals, "a burst is not steady arrivals")
	for range 30 { // every server gains one a cycle: a minute of steady arrivals
		for i := range servers {
			servers[i].Sessions++
		}
		plan()
	}
	assert.False(t, plan().RareArrivals, "steady arrivals")
	back := 0
	for !plan().RareArrivals {
		back++
		require.Less(t, back, 40, "rare again within 40 cycles of the arrivals stopping (from 1 a cycle to below 0.1)")
	}
}

func TestRunRareValidation(t *testing.T) {
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		p := DefaultPolicy()
		p.RunRare = bad
		assert.ErrorContains(t, p.Validate(), "run_rare")
	}
	p := DefaultPolicy()
	p.RunRareSpread = 1
	assert.ErrorContains(t, p.Validate(), "run_rare_spread")
	p.RunRare = 0 // off: the spread is not read
	assert.NoError(t, p.Validate())
}

// TestRunRareBurstAcrossACycle: a burst spread over a second can straddle
// a cycle. The cycle in between sees s5's new connection but not yet its
// load (the fast signal shows it over the next seconds); counted from the
// new connections alone, s5's cap would rise with them and make it the
// most favoured again for the next heavy client. Its gains come off its
// allowance, so the rest of the burst goes elsewhere.
func TestRunRareBurstAcrossACycle(t *testing.T) {
	vals := []float64{100, 100, 100, 100, 50, 100, 100, 100}
	servers := withScur(up(100, 100, 100, 100, 100, 100, 100, 100), 30, 30, 30, 30, 30, 30, 30, 30)
	c := mustController(t, DefaultPolicy())
	plan := settleCycles(t, c, servers, vals, rareWarm+10)
	require.True(t, plan.RareArrivals)
	first := burst(plan, servers, 1)
	require.Equal(t, map[string]int{"s5": 1}, first, "the first heavy client goes to the light server")
	servers[4].Sessions++
	plan = settleCycles(t, c, servers, vals, 1) // the same loads: the new client's not seen yet
	require.True(t, plan.RareArrivals, "a burst does not end rare arrivals")
	rest := burst(plan, servers, 2)
	assert.Zero(t, rest["s5"], "the rest of the burst: %v", rest)
	assert.Len(t, rest, 2, "on two other servers: %v", rest)
}

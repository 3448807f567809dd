package weighter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlanPartialCoverageKeepsScale is the case that showed the rule broken:
// s1..s4 at 256/128/64/32, only s3 and s4 report, with loads 40 and 80. Their
// weights are already in the ratio the function wants (2:1), so nothing moves;
// before, s3 was rescaled among the reporting servers alone, 64 → 256 (x4),
// which gave s3+s4 half the new connections instead of a fifth.
func TestPlanPartialCoverageKeepsScale(t *testing.T) {
	c := mustController(t, DefaultPolicy())
	plan := c.Plan(t0, loadsAt(t0, nan, nan, 40, 80), up(256, 128, 64, 32))
	require.False(t, plan.Hold, plan.Reason)
	s := byServer(plan)
	for name, want := range map[string]int{"s1": 256, "s2": 128, "s3": 64, "s4": 32} {
		assert.Equal(t, want, s[name].New, name)
		assert.Equal(t, ActionKeep, s[name].Action, "%s: %s", name, s[name].Reason)
	}
	assert.Empty(t, plan.Changes())
	assert.InDelta(t, 1, plan.Scale, 1e-9)
}

// TestPlanPartialCoverageMovesWithinShare: the servers that report share
// among themselves the weight they hold together; the held servers keep theirs.
func TestPlanPartialCoverageMovesWithinShare(t *testing.T) {
	p := DefaultPolicy()
	p.Deadband = 0
	c := mustController(t, p)
	// s3 and s4 report 40 and 40: they want equal weights; together they hold 96.
	s := byServer(c.Plan(t0, loadsAt(t0, nan, nan, 40, 40), up(256, 128, 64, 32)))
	assert.Equal(t, 256, s["s1"].New)
	assert.Equal(t, 128, s["s2"].New)
	assert.Equal(t, 48, s["s3"].New, "64 → 48: s3 gives s4 what it gains")
	assert.Equal(t, 48, s["s4"].New, "32 → 48, within max_step 2")
	assert.Equal(t, ReasonMissing, s["s1"].Reason)
}

// TestPlanHeldServerRescaled: when the servers that report can only fill the
// scale by moving every weight up, the held server moves up by the same factor,
// so its share of new connections stays what it was.
func TestPlanHeldServerRescaled(t *testing.T) {
	p := DefaultPolicy()
	p.Deadband = 0
	c := mustController(t, p)
	// every weight at HAProxy's default 1; s2 has no data.
	s := byServer(c.Plan(t0, loadsAt(t0, 10, nan, 10, 10), up(1, 1, 1, 1)))
	for _, name := range []string{"s1", "s2", "s3", "s4"} {
		assert.Equal(t, 256, s[name].New, name)
	}
	assert.Equal(t, ActionSet, s["s2"].Action)
	assert.Contains(t, s["s2"].Reason, ReasonMissing)
	assert.Contains(t, s["s2"].Reason, ReasonRescale)
}

// TestPlanDeadbandOnRescaledWeight: the deadband compares the wanted weight with
// the current one on the backend's scale. Before, it compared it with the
// unscaled weight, so a server whose wanted weight happened to equal its old,
// unscaled one kept it while the rest of the backend was scaled up 4x.
func TestPlanDeadbandOnRescaledWeight(t *testing.T) {
	c := mustController(t, DefaultPolicy())
	// the largest weight is 64: scale 4. s2 is 4x as loaded as s1: wants 64,
	// a share of 1/5 from 1/2; it gets 1/4, halved.
	s := byServer(c.Plan(t0, loadsAt(t0, 10, 40), up(64, 64)))
	assert.Equal(t, 256, s["s1"].New)
	assert.Equal(t, 85, s["s2"].New, "256/3 rounded: a share of 1/4")
}

// TestPropertyMaxStepAndHeldShare runs random backends through random cycles
// with random coverage and checks, for every cycle and every server, the rules
// the README states:
//   - no server's share of the backend's weight moves by more than a factor
//     max_step, up to rounding to integers (checkShareStep);
//   - a server held for missing data keeps its share of the backend's total
//     weight (up to rounding): the others' moves among themselves do not
//     shift traffic to or from it.
func TestPropertyMaxStepAndHeldShare(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 4000 {
		p := DefaultPolicy()
		p.Function = FunctionNames()[rng.IntN(len(Functions))]
		p.MaxStep = []float64{1.5, 2, 3, 0}[rng.IntN(4)]
		p.Deadband = rng.IntN(4)
		p.MinCoverage = []float64{0, 0.25, 0.5}[rng.IntN(3)]
		p.Aggressiveness = []float64{0.5, 1, 2}[rng.IntN(3)]
		p.MaxWeight = []int{MaxWeight, MaxWeight, 100}[rng.IntN(3)]
		servers := randomServers(rng)
		c := mustController(t, p)
		for cycle := range 6 {
			now := t0.Add(time.Duration(cycle) * 5 * time.Second)
			loads := randomCoverage(rng, now, servers)
			base := map[string]int{}
			for _, s := range servers {
				base[s.Name] = s.Weight
			}
			plan := c.Plan(now, loads, servers)
			where := fmt.Sprintf("run %d cycle %d, %s max_step %v deadband %v max_weight %d",
				run, cycle, p.Function, p.MaxStep, p.Deadband, p.MaxWeight)
			checkPlan(t, plan, servers)
			for _, broken := range checkShareStep(p, plan, base, &maxStepStats{}) {
				t.Errorf("%s: %s", where, broken)
			}
			checkHeldShare(t, where, p, plan)
			c.Commit(plan.Changes())
			for i := range servers {
				if s := plan.Servers[indexOf(plan, servers[i].Name)]; s.Action == ActionSet {
					servers[i].Weight = s.New
				}
			}
			if t.Failed() {
				t.Logf("servers %+v\nloads %v\nplan %+v", servers, loads, plan)
				return
			}
		}
	}
}

func randomServers(rng *rand.Rand) []ServerState {
	n := 2 + rng.IntN(10)
	out := make([]ServerState, n)
	for i := range out {
		w := 1 + rng.IntN(MaxWeight)
		switch rng.IntN(4) {
		case 0:
			w = 1 // HAProxy's default
		case 1:
			w = MaxWeight
		}
		out[i] = ServerState{Name: fmt.Sprintf("srv%02d", i), Weight: w, Admin: AdminReady, Operational: "up"}
	}
	return out
}

// randomCoverage gives each server data with a probability drawn per cycle,
// so some cycles are complete, some partial and some held by the guard.
func randomCoverage(rng *rand.Rand, now time.Time, servers []ServerState) Loads {
	pData := []float64{1, 0.9, 0.6, 0.3}[rng.IntN(4)]
	out := Loads{}
	for _, s := range servers {
		if rng.Float64() >= pData {
			continue
		}
		v := math.Exp(rng.NormFloat64() * 1.5) // heavy-tailed, 1000x apart at times
		if rng.IntN(10) == 0 {
			v = 0
		}
		out[s.Name] = Series{{Time: now, Value: v}}
	}
	return out
}

func checkHeldShare(t *testing.T, where string, p Policy, plan Plan) {
	t.Helper()
	if plan.Hold {
		return
	}
	var before, after float64
	n := 0
	for _, s := range plan.Servers {
		if s.Action != ActionSkip {
			before += float64(s.Current)
			after += float64(s.New)
			n++
		}
	}
	// Every weight is within 1 of its real value (rounding, the floor 1) and,
	// with a deadband, within the deadband of it: the held weight by that much,
	// the total by n times that.
	for _, s := range plan.Servers {
		if s.Action == ActionSkip || !math.IsNaN(s.Load) {
			continue
		}
		shareBefore, shareAfter := float64(s.Current)/before, float64(s.New)/after
		tol := float64(1+p.Deadband) * (1 + shareBefore*float64(n)) / after
		assert.InDelta(t, shareBefore, shareAfter, tol, "%s: held %s %d → %d: share %.3f → %.3f",
			where, s.Server, s.Current, s.New, shareBefore, shareAfter)
	}
}

// TestPlanHeldWithHugeMaxStep: a large max_step (valid: finite and > 1)
// limits nothing. Before, the share's bisection ran over [b/step/r, b·step/r]:
// from +Inf when b × max_step overflows, and 64 halvings of a bracket that
// wide (max_step 1e20) land nowhere near the factor. The factor came out far
// too large and the backend's scale near 0: every weight, held ones
// included, was set to 1.
func TestPlanHeldWithHugeMaxStep(t *testing.T) {
	for _, step := range []float64{1e20, 1e307} {
		p := DefaultPolicy()
		p.Deadband = 0
		p.MaxStep = step
		require.NoError(t, p.Validate())
		c := mustController(t, p)
		plan := c.Plan(t0, loadsAt(t0, nan, nan, 40, 40), up(256, 128, 64, 32))
		s := byServer(plan)
		assert.InDelta(t, 1, plan.Scale, 1e-9, "max_step %g", step)
		for name, want := range map[string]int{"s1": 256, "s2": 128, "s3": 48, "s4": 48} {
			assert.Equal(t, want, s[name].New, "max_step %g: %s", step, name)
		}
	}
}

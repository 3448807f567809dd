package weighter

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// free turns off the guards so that New = the function's raw output.
func free() Policy {
	p := DefaultPolicy()
	p.Deadband, p.MaxStep, p.MaxRun = 0, 0, 0
	return p
}

func TestPlanWeightsSortedAndChanges(t *testing.T) {
	c := mustController(t, free())
	servers := up(256, 256, 256, 256)
	servers[0], servers[3] = servers[3], servers[0] // input order must not matter
	plan := c.Plan(t0, loadsAt(t0, 10, 20, 40, 0), servers)
	require.False(t, plan.Hold)
	assert.Equal(t, "limited-proportions", plan.Function)
	assert.Equal(t, t0, plan.Time)
	var names []string
	var news []int
	for _, s := range plan.Servers {
		names, news = append(names, s.Server), append(news, s.New)
	}
	assert.Equal(t, []string{"s1", "s2", "s3", "s4"}, names)
	assert.Equal(t, []int{112, 56, 28, 256}, news)
	assert.Equal(t, []Change{{"s1", 112}, {"s2", 56}, {"s3", 28}}, plan.Changes(), "s4 is unchanged")
	assert.Equal(t, ReasonUnchanged, byServer(plan)["s4"].Reason)
	assert.InDelta(t, 40/17.5, plan.Imbalance, 1e-12)
	assert.Equal(t, 1.0, plan.Coverage)
}

// TestPlanRateLimit: max_step bounds each server's share of the backend's
// weight. From 256, 100, 10, 100 (shares .549, .215, .021, .215) the function
// wants 112, 56, 28, 256: s4's share would go up 4.7x and s3's 5.8x, so both
// are held at 2x; s1 and s2 share out the rest in the function's ratio, and
// the backend is scaled so the largest weight is 256.
func TestPlanRateLimit(t *testing.T) {
	p := free()
	p.MaxStep = 2
	c := mustController(t, p)
	plan := c.Plan(t0, loadsAt(t0, 10, 20, 40, 0), up(256, 100, 10, 100))
	s := byServer(plan)
	assert.Equal(t, 210, s["s1"].New)
	assert.Equal(t, 105, s["s2"].New)
	assert.Equal(t, 26, s["s3"].New, "25.6 rounded: 10 × 2 × 1.28")
	assert.Equal(t, 256, s["s4"].New, "100 × 2 × 1.28")
	assert.InDelta(t, 1.28, plan.Scale, 1e-9)
	assert.Equal(t, ReasonRateLimit, s["s4"].Reason)
	assert.Equal(t, ReasonRateLimit, s["s3"].Reason)
	assert.Equal(t, ReasonRebalance, s["s2"].Reason)
	assert.Equal(t, 2*s["s2"].New, s["s1"].New, "the free servers keep the function's ratio")
	shares := func(w ...int) []float64 {
		sum := 0
		for _, x := range w {
			sum += x
		}
		out := make([]float64, len(w))
		for i, x := range w {
			out[i] = float64(x) / float64(sum)
		}
		return out
	}
	before, after := shares(256, 100, 10, 100), shares(210, 105, 26, 256)
	assert.InDelta(t, 2, after[3]/before[3], 0.01, "s4's share doubled, no more")
}

// TestPlanRateLimitRescales: from HAProxy's default weight 1 every share is
// equal; the first cycle already moves each by up to max_step (the backend is
// then scaled so the largest weight is 256), instead of doubling every
// weight alike.
func TestPlanRateLimitRescales(t *testing.T) {
	p := DefaultPolicy()
	c := mustController(t, p)
	plan := c.Plan(t0, loadsAt(t0, 10, 20, 40, 80), up(1, 1, 1, 1))
	var news []int
	for _, s := range plan.Servers {
		news = append(news, s.New)
	}
	// raw 256, 128, 64, 32 from shares of 1/4: s1 doubles (1/2), s3 and s4
	// halve (1/8; s4 wanted 1/16)
	assert.Equal(t, []int{256, 128, 64, 64}, news)
	assert.Len(t, plan.Changes(), 4)
}

func TestPlanDeadband(t *testing.T) {
	p := free()
	p.Deadband = 2
	c := mustController(t, p)
	// the largest weight is 255: the scale (256/255) rounds away for the others
	plan := byServer(c.Plan(t0, loadsAt(t0, 10, 20, 40, 0), up(113, 58, 28, 255)))
	assert.Equal(t, ActionKeep, plan["s1"].Action, "|112-113| < 2")
	assert.Equal(t, 113, plan["s1"].New)
	assert.Equal(t, ReasonDeadband, plan["s1"].Reason)
	assert.Equal(t, ActionSet, plan["s2"].Action, "|56-58| = 2 is written")
	assert.Equal(t, ActionKeep, plan["s3"].Action)
	assert.Equal(t, ActionSet, plan["s4"].Action)
}

func TestPlanMissingKeep(t *testing.T) {
	c := mustController(t, free())
	plan := c.Plan(t0, loadsAt(t0, 10, nan, 40, 0), up(7, 7, 7, 7))
	s := byServer(plan)
	assert.True(t, math.IsNaN(s["s2"].Load))
	// the others are weighted among themselves: LP over [10 40 0] …
	want, err := Compute(free(), []float64{10, 40, 0}, nil)
	require.NoError(t, err)
	assert.Equal(t, want, []int{s["s1"].New, s["s3"].New, s["s4"].New})
	// … and s2 keeps its share: all four had 7, so s2 keeps a quarter of the
	// total, the mean of the others' weights (the backend was scaled up).
	assert.Equal(t, ActionSet, s["s2"].Action)
	assert.Equal(t, int(math.Round(float64(want[0]+want[1]+want[2])/3)), s["s2"].New)
	assert.Contains(t, s["s2"].Reason, ReasonMissing)
	assert.Contains(t, s["s2"].Reason, ReasonRescale)

	// when the others' weights already fit, s2 is left alone
	s = byServer(c.Plan(t0, loadsAt(t0, 10, nan, 40), up(256, 100, 64)))
	assert.Equal(t, ActionKeep, s["s2"].Action)
	assert.Equal(t, 100, s["s2"].New)
	assert.Equal(t, ReasonMissing, s["s2"].Reason)
}

func TestPlanMissingMean(t *testing.T) {
	p := free()
	p.Missing = MissingMean
	c := mustController(t, p)
	s := byServer(c.Plan(t0, loadsAt(t0, 10, nan, 40, 0), up(7, 7, 7, 7)))
	want, err := Compute(p, []float64{10, 50.0 / 3, 40, 0}, nil)
	require.NoError(t, err)
	assert.Equal(t, want, []int{s["s1"].New, s["s2"].New, s["s3"].New, s["s4"].New})
	assert.Equal(t, ActionSet, s["s2"].Action)
	assert.Contains(t, s["s2"].Reason, "missing data: mean load 16.67 used")
}

func TestPlanStaleSeriesIsMissing(t *testing.T) {
	p := free()
	p.MaxAge = duration.Duration(time.Minute)
	c := mustController(t, p)
	loads := loadsAt(t0, 10, 20, 40)
	loads["s2"] = Series{{Time: t0.Add(-2 * time.Minute), Value: 20}}
	s := byServer(c.Plan(t0, loads, up(256, 9, 64)))
	assert.Equal(t, ReasonMissing, s["s2"].Reason)
}

func TestPlanCoverageGuard(t *testing.T) {
	tests := []struct {
		name   string
		min    float64
		loads  []float64
		hold   bool
		reason string
	}{
		{"one of four", 0.5, []float64{1, nan, nan, nan}, true,
			"only 1 of 4 servers have valid data (need at least 2)"},
		{"two of five below half", 0.5, []float64{1, 2, nan, nan, nan}, true,
			"only 2 of 5 servers have valid data (40% < min_coverage 50%)"},
		{"two of four is enough", 0.5, []float64{1, 2, nan, nan}, false, ""},
		{"single server", 0, []float64{1}, true, "only 1 of 1 servers have valid data (need at least 2)"},
		{"min coverage 1", 1, []float64{1, 2, 3, nan}, true,
			"only 3 of 4 servers have valid data (75% < min_coverage 100%)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := free()
			p.MinCoverage = tc.min
			c := mustController(t, p)
			ws := make([]int, len(tc.loads))
			for i := range ws {
				ws[i] = 50
			}
			plan := c.Plan(t0, loadsAt(t0, tc.loads...), up(ws...))
			assert.Equal(t, tc.hold, plan.Hold)
			assert.Equal(t, tc.reason, plan.Reason)
			if tc.hold {
				assert.Empty(t, plan.Changes())
				for _, s := range plan.Servers {
					assert.Equal(t, ActionKeep, s.Action)
					assert.Equal(t, "hold: "+tc.reason, s.Reason)
				}
			}
		})
	}
}

// TestPlanCoverageCountsOnlyWeightable: servers in maint do not count against coverage.
func TestPlanCoverageCountsOnlyWeightable(t *testing.T) {
	c := mustController(t, free())
	servers := up(9, 9, 9, 9)
	servers[2].Admin, servers[3].Admin = AdminMaint, AdminMaint
	plan := c.Plan(t0, loadsAt(t0, 1, 2), servers)
	assert.False(t, plan.Hold)
	assert.Equal(t, 1.0, plan.Coverage)
}

func TestPlanOperatorStates(t *testing.T) {
	servers := up(9, 9, 9, 9, 9)
	servers[0].Admin = AdminDrain
	servers[1].Admin = AdminMaint
	servers[2].Operational = "down"
	loads := loadsAt(t0, 1, 1, 1000, 10, 40)
	s := byServer(mustController(t, free()).Plan(t0, loads, servers))
	assert.Equal(t, ServerPlan{Server: "s1", Load: 1, Current: 9, Raw: 9, New: 9, Action: ActionSkip, Reason: "operator drain"}, s["s1"])
	assert.Equal(t, "operator maint", s["s2"].Reason)
	assert.Equal(t, ActionSkip, s["s3"].Action)
	assert.Equal(t, "down", s["s3"].Reason)
	// excluded from the weights of the others: LP over [10 40] only
	want, err := Compute(free(), []float64{10, 40}, nil)
	require.NoError(t, err)
	assert.Equal(t, want, []int{s["s4"].New, s["s5"].New})

	p := free()
	p.ManageOperatorStates = true
	s = byServer(mustController(t, p).Plan(t0, loads, servers))
	assert.Equal(t, ActionSet, s["s1"].Action)
	assert.Equal(t, ActionSet, s["s2"].Action)
	assert.Equal(t, ActionSkip, s["s3"].Action, "down stays skipped")
}

// TestPlanTakesOverWeightsAboveMax: IPVS allows weights far above 256
// (keepalived configurations with weight 1000 are common). Such a server is
// the daemon's to weight like any other: the first cycle brings the backend
// into 1..256 (the rate limit cannot hold a weight above the range), instead
// of skipping the server for ever as out of range. A negative weight is still
// no state the daemon can reason from.
func TestPlanTakesOverWeightsAboveMax(t *testing.T) {
	c := mustController(t, DefaultPolicy())
	servers := up(1000, 1000, 1000)
	plan := c.Plan(t0, loadsAt(t0, 10, 20, 40), servers)
	for _, s := range plan.Servers {
		assert.Equal(t, ActionSet, s.Action, "%+v", s)
		assert.True(t, s.New >= 1 && s.New <= MaxWeight, "%+v", s)
	}
	apply(c, plan, servers)
	plan = c.Plan(t0.Add(10*time.Second), loadsAt(t0.Add(10*time.Second), 10, 20, 40), servers)
	s := byServer(plan)
	assert.Greater(t, s["s1"].New, s["s3"].New, "then weighted by load: %+v", plan.Servers)

	s = byServer(c.Plan(t0, loadsAt(t0, 10, 20, 40), up(-5, 256, 256)))
	assert.Equal(t, ActionSkip, s["s1"].Action)
	assert.Equal(t, "current weight -5 out of range", s["s1"].Reason)
}

func TestPlanZeroWeightNotOursIsOperatorDrain(t *testing.T) {
	c := mustController(t, free())
	s := byServer(c.Plan(t0, loadsAt(t0, 1, 2, 3), up(0, 9, 9)))
	assert.Equal(t, ActionSkip, s["s1"].Action)
	assert.Equal(t, "operator drain (weight 0 not set by us)", s["s1"].Reason)

	// manage_operator_states covers the admin states, not a weight 0
	p := free()
	p.ManageOperatorStates = true
	s = byServer(mustController(t, p).Plan(t0, loadsAt(t0, 1, 2, 3), up(0, 9, 9)))
	assert.Equal(t, ActionSkip, s["s1"].Action)
	assert.Equal(t, "operator drain (weight 0 not set by us)", s["s1"].Reason)

	// a 0 we wrote ourselves, as the target's record says, is ours to change
	ours := up(0, 9, 9)
	ours[0].OwnZero = true
	s = byServer(c.Plan(t0, loadsAt(t0, 1, 2, 3), ours))
	assert.Equal(t, ActionSet, s["s1"].Action)
	assert.Equal(t, 256, s["s1"].New)
}

// Whether a weight 0 is ours is the target's record's to say, not what this
// Controller last wrote: a fresh Controller (a reload with another policy)
// takes the process's own drain as its own, and a 0 set after the record
// ended (HAProxy restarted and put a weight back, then an operator drained)
// is the operator's although the Controller's last write was a 0.
func TestPlanZeroWeightIsOursByTheTargetsRecord(t *testing.T) {
	ours := up(0, 9, 9)
	ours[0].OwnZero = true
	s := byServer(mustController(t, free()).Plan(t0, loadsAt(t0, 1, 2, 3), ours))
	assert.Equal(t, ActionSet, s["s1"].Action, "a fresh Controller resumes the process's own drain")

	c := mustController(t, free())
	c.Commit([]Change{{Server: "s1", Weight: 0}})
	s = byServer(c.Plan(t0, loadsAt(t0, 1, 2, 3), up(0, 9, 9)))
	assert.Equal(t, ActionSkip, s["s1"].Action)
	assert.Equal(t, "operator drain (weight 0 not set by us)", s["s1"].Reason)
}

func TestPlanReapplyAfterOutsideChange(t *testing.T) {
	p := free()
	p.MaxStep, p.Deadband = 2, 50
	c := mustController(t, p)
	c.Commit([]Change{{"s1", 100}, {"s2", 200}, {"s3", 256}})
	// Another tool set every weight to 5 (not the configuration's 1, which
	// would be a reset: TestPlanStartsAgainAfterHAProxyResetsEveryWeight).
	// Wanted: 256, 128, 64.
	s := byServer(c.Plan(t0, loadsAt(t0, 10, 20, 40), up(5, 5, 5)))
	for _, name := range []string{"s1", "s2", "s3"} {
		assert.Equal(t, ActionSet, s[name].Action, name)
		assert.Equal(t, ReasonReapply, s[name].Reason, name)
	}
	// The shares are measured from 100, 200, 256 (sum 556), not from 1, 1, 1:
	// s1's share (.18) at most doubles, s3's (.46) at most halves.
	assert.Equal(t, 225, s["s1"].New)
	assert.Equal(t, 256, s["s2"].New)
	assert.Equal(t, 144, s["s3"].New)
	assert.InDelta(t, 2*100.0/556, 225.0/625, 0.001, "s1's share doubled")
	assert.InDelta(t, 256.0/556/2, 144.0/625, 0.001, "s3's share halved")

	// a small outside change is re-applied although it is inside the deadband
	c = mustController(t, p)
	c.Commit([]Change{{"s1", 256}, {"s2", 128}, {"s3", 64}})
	s = byServer(c.Plan(t0, loadsAt(t0, 10, 20, 40), up(256, 127, 64)))
	assert.Equal(t, ActionSet, s["s2"].Action)
	assert.Equal(t, 128, s["s2"].New)
	assert.Equal(t, ActionKeep, s["s1"].Action)

	// missing data: our last weight is re-applied as it was
	s = byServer(c.Plan(t0, loadsAt(t0, 10, nan, 40), up(256, 1, 64)))
	assert.Equal(t, ActionSet, s["s2"].Action)
	assert.Equal(t, 128, s["s2"].New)
	assert.Equal(t, ReasonReapply+"; "+ReasonMissing, s["s2"].Reason)
}

func TestPlanUnknownLoads(t *testing.T) {
	loads := loadsAt(t0, 1, 2)
	loads["ghost"] = Series{{Time: t0, Value: 1}}
	loads["alien"] = nil
	plan := mustController(t, free()).Plan(t0, loads, up(9, 9))
	assert.Equal(t, []string{"alien", "ghost"}, plan.Unknown)
	assert.Len(t, plan.Servers, 2)
}

func TestPlanSmoothing(t *testing.T) {
	p := free()
	p.Smoothing = duration.Duration(10 * time.Second)
	p.PanicThreshold = 2
	c := mustController(t, p)
	servers := up(9, 9, 9)
	c.Plan(t0, loadsAt(t0, 10, 10, 10), servers)
	// one half-life later s1 jumped to 20: the EWMA is half way, 15
	s := byServer(c.Plan(t0.Add(10*time.Second), loadsAt(t0, 20, 10, 10), servers))
	assert.InDelta(t, 15, s["s1"].Load, 1e-9)
	assert.InDelta(t, 10, s["s2"].Load, 1e-9)
	// s3 goes to 100 > 2 × mean(20, 10, 100): panic bypass, raw value at once
	s = byServer(c.Plan(t0.Add(11*time.Second), loadsAt(t0, 20, 10, 100), servers))
	assert.Equal(t, 100.0, s["s3"].Load)
	// missing data stays missing, whatever the EWMA remembers
	s = byServer(c.Plan(t0.Add(12*time.Second), loadsAt(t0, 20, nan, 100), servers))
	assert.True(t, math.IsNaN(s["s2"].Load))
}

func TestPlanDrainHysteresis(t *testing.T) {
	p := free()
	p.DrainAbove, p.ResumeBelow, p.MaxDrained = 100, 50, 0.5
	c := mustController(t, p)
	step := func(weights []int, loads ...float64) map[string]ServerPlan {
		plan := c.Plan(t0, loadsAt(t0, loads...), up(weights...))
		c.Commit(plan.Changes())
		return byServer(plan)
	}
	s := step([]int{256, 256, 256, 256}, 150, 120, 110, 10)
	assert.Equal(t, 0, s["s1"].New, "most loaded drained first")
	assert.Equal(t, ActionSet, s["s1"].Action)
	assert.Equal(t, "drained: load 150 > drain_above 100", s["s1"].Reason)
	assert.Equal(t, 0, s["s2"].New, "second drained: 2 of 4 allowed")
	assert.NotZero(t, s["s3"].New, "max_drained reached")
	assert.Contains(t, s["s3"].Reason, "max_drained reached")

	s = step([]int{0, 0, 200, 256}, 70, 40, 60, 10)
	assert.Equal(t, ActionKeep, s["s1"].Action, "70 is between resume_below and drain_above: stays drained")
	assert.Equal(t, 0, s["s1"].New)
	assert.Equal(t, ActionSet, s["s2"].Action, "40 < resume_below: back to normal weighting")
	assert.NotZero(t, s["s2"].New)
	assert.Contains(t, s["s2"].Reason, "resumed: load 40 < resume_below 50")

	// HAProxy reload reset the drained server's weight: drain it again
	s = step([]int{1, 9, 9, 9}, 70, 40, 60, 10)
	assert.Equal(t, ActionSet, s["s1"].Action)
	assert.Equal(t, 0, s["s1"].New)
}

func TestPlanJSON(t *testing.T) {
	plan := mustController(t, free()).Plan(t0, loadsAt(t0, 10, nan, 40), up(256, 9, 64))
	b, err := json.Marshal(plan)
	require.NoError(t, err)
	assert.Contains(t, string(b), `{"server":"s2","load":null,"current":9,"raw":9,"new":9,"action":"keep","reason":"missing data"}`)
	var back Plan
	require.NoError(t, json.Unmarshal(b, &back))
	assert.True(t, math.IsNaN(back.Servers[1].Load))
	assert.Equal(t, plan.Servers[0], back.Servers[0])
}

// TestFeedbackConverges closes the loop with a toy leastconn model: a server's
// load is its share of the connections (∝ weight) times its per-connection rate.
// Every cycle brings a new data point (feedback integrates each point once).
func TestFeedbackConverges(t *testing.T) {
	p := DefaultPolicy()
	p.Function = "feedback"
	c := mustController(t, p)
	rates := []float64{1, 2, 4, 8}
	servers := up(1, 1, 1, 1)
	var imb float64
	for cycle := 0; cycle < 40; cycle++ {
		total := 0
		for _, s := range servers {
			total += s.Weight
		}
		loads := make([]float64, len(rates))
		for i, r := range rates {
			loads[i] = 1000 * r * float64(servers[i].Weight) / float64(total)
		}
		at := t0.Add(time.Duration(cycle) * time.Second)
		plan := c.Plan(at, loadsAt(at, loads...), servers)
		imb = plan.Imbalance
		for i, s := range plan.Servers {
			servers[i].Weight = s.New
		}
		c.Commit(plan.Changes())
	}
	assert.Less(t, imb, 1.1, "weights %v", servers)
	assert.Equal(t, 256, servers[0].Weight)
}

func TestPlanLeavesCallerSlicesAlone(t *testing.T) {
	servers := up(9, 9, 9)
	servers[0].Name, servers[2].Name = "s3", "s1"
	before := slices.Clone(servers)
	c := mustController(t, free())
	first := c.Plan(t0, loadsAt(t0, 1, 2, 3), servers)
	second := c.Plan(t0, loadsAt(t0, 1, 2, 3), servers) // buffers reused: first must not change
	assert.Equal(t, before, servers)
	assert.Equal(t, first.Servers, second.Servers)
	assert.NotSame(t, &first.Servers[0], &second.Servers[0])
}

func TestPlanHoldsWithoutWeightableServers(t *testing.T) {
	servers := up(9, 9)
	servers[0].Admin, servers[1].Operational = AdminMaint, "down"
	plan := mustController(t, free()).Plan(t0, loadsAt(t0, 1, 2), servers)
	assert.True(t, plan.Hold)
	assert.Equal(t, "no weightable servers", plan.Reason)
	assert.Empty(t, plan.Changes())
	assert.Zero(t, plan.Coverage)
	assert.Zero(t, plan.Imbalance)
}

// TestPlanForgetsServersThatLeft: state of a removed server is dropped, so a
// server of the same name that comes back later starts fresh.
func TestPlanForgetsServersThatLeft(t *testing.T) {
	p := free()
	p.Smoothing = duration.Duration(time.Minute)
	c := mustController(t, p)
	c.Plan(t0, loadsAt(t0, 1, 2, 3), up(9, 9, 9))
	c.Commit([]Change{{"s1", 50}, {"s2", 60}, {"s3", 70}})
	c.Plan(t0, loadsAt(t0, 1, 2), up(9, 9)) // s3 left
	assert.Nil(t, c.roster.find("s3"), "no memory of s3 (written, EWMA)")
	require.NotNil(t, c.roster.find("s2"))
	assert.Equal(t, 60, c.roster.find("s2").written)
	s := byServer(c.Plan(t0.Add(time.Second), loadsAt(t0, 1, 2, 300), up(9, 9, 9)))
	assert.Equal(t, 300.0, s["s3"].Load, "no EWMA memory of the old s3")
	assert.NotEqual(t, ReasonReapply, s["s3"].Reason)
}

// TestPlanFollowsServerOrderChanges: the cached sort order is only reused for
// the same names in the same order.
func TestPlanFollowsServerOrderChanges(t *testing.T) {
	c := mustController(t, free())
	names := func(p Plan) (out []string) {
		for _, s := range p.Servers {
			out = append(out, s.Server+":"+strconv.Itoa(s.Current))
		}
		return out
	}
	a := []ServerState{{Name: "b", Weight: 2, Operational: "up"}, {Name: "a", Weight: 1, Operational: "up"}, {Name: "c", Weight: 3, Operational: "up"}}
	assert.Equal(t, []string{"a:1", "b:2", "c:3"}, names(c.Plan(t0, nil, a)))
	b := []ServerState{a[2], a[0], a[1]}
	assert.Equal(t, []string{"a:1", "b:2", "c:3"}, names(c.Plan(t0, nil, b)))
	d := []ServerState{a[2], {Name: "d", Weight: 4, Operational: "up"}, a[1]}
	assert.Equal(t, []string{"a:1", "c:3", "d:4"}, names(c.Plan(t0, nil, d)))
	d[0].Weight = 9 // same names, same order: new values are read
	assert.Equal(t, []string{"a:1", "c:9", "d:4"}, names(c.Plan(t0, nil, d)))
	assert.Empty(t, c.Plan(t0, nil, nil).Servers)
}

// TestPlanTakesWeightsSentWithLostRepliesForItsOwn: a batch whose replies
// were lost (an UnconfirmedError) may have been applied in full, in part or
// not at all. The next plan takes a server found at the weight sent for the
// daemon's own write applied, one found at the weight written before for
// one not reached, and only one found at neither for changed outside.
func TestPlanTakesWeightsSentWithLostRepliesForItsOwn(t *testing.T) {
	c := mustController(t, free())
	c.Plan(t0, loadsAt(t0, 10, 20, 40, 10), up(5, 5, 5, 5))
	c.Commit([]Change{{"s1", 100}, {"s2", 200}, {"s3", 256}, {"s4", 100}})
	c.Sent([]Change{{"s1", 150}, {"s2", 150}, {"s3", 150}, {"s4", 150}})
	// s1 and s2 took the batch, s3 was not reached, an operator set s4 to 7.
	s := byServer(c.Plan(t0, loadsAt(t0, 10, 20, 40, 10), up(150, 150, 256, 7)))
	for _, name := range []string{"s1", "s2", "s3"} {
		assert.NotContains(t, s[name].Reason, ReasonReapply, name)
	}
	assert.Equal(t, ReasonReapply, s["s4"].Reason)

	// What was sent is settled once: s1's 150 is now the weight written,
	// and a later change of it is one made outside.
	s = byServer(c.Plan(t0, loadsAt(t0, 10, 20, 40, 10), up(9, 150, 256, 100)))
	assert.Equal(t, ReasonReapply, s["s1"].Reason)
}

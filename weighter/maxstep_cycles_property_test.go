package weighter

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPropertyMaxStepOverCycles drives backends through RunCycle, as the
// daemon does, for 10,000 cycles per policy, with the data the review's run
// had: loads 1..1000, about 5 % of points NaN, -1, 0, 1e308 or the server's
// series missing altogether; weights carried from cycle to cycle by an
// HAProxy model (integers, from its default weight 1 at start), servers set
// to drain or maint and back, going down and up, and reloads that reset every
// weight; open connections that move between cycles, which the run bound
// (max_run, on by default) reads. Every cycle must keep the max_step rule
// (checkShareStep), the run bound's caps included. Seeds are fixed, so a
// failure names a run and cycle that reproduce.
func TestPropertyMaxStepOverCycles(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Policy)
	}{
		{"default", func(*Policy) {}},
		{"max_step 1.5", func(p *Policy) { p.MaxStep = 1.5 }},
		{"max_step 3 deadband 0", func(p *Policy) { p.MaxStep, p.Deadband = 3, 0 }},
		{"max_step 1.1 deadband 5", func(p *Policy) { p.MaxStep, p.Deadband = 1.1, 5 }},
		{"max_step 2 feedback", func(p *Policy) { p.Function = "feedback" }},
		{"max_step 2 normalised-exponential", func(p *Policy) { p.Function, p.Aggressiveness = "normalised-exponential", 2 }},
		{"max_step 2 max_weight 100 min_coverage 0", func(p *Policy) { p.MaxWeight, p.MinCoverage = 100, 0 }},
		{"max_step 4 drain_above", func(p *Policy) { p.MaxStep, p.DrainAbove, p.ResumeBelow = 4, 950, 500 }},
		{"max_step 2 missing mean", func(p *Policy) { p.Missing = MissingMean }},
		{"max_step 1.5 max_run 0.5 run_churn 4", func(p *Policy) { p.MaxStep, p.MaxRun, p.RunChurn = 1.5, 0.5, 4 }},
		// whatever these backends gain, new connections count as rare after
		// the warm-up: the tightened bound and the switch to it
		{"max_step 2 run_rare always", func(p *Policy) { p.RunRare = 1e300 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			tc.edit(&p)
			st := runMaxStepCycles(t, p, 10_000)
			t.Logf("%d cycles, %d writes, %d servers checked: %d outside max_step %v; on the written integers %d further "+
				"by rounding (worst share move x%.3f); %d weights moved more than max_step on the scale where the largest is max_weight (worst x%.3f)",
				st.cycles, st.writes, st.checked, st.broken, p.MaxStep, st.rounded, st.worst, st.weightMoves, st.worstWeight)
			t.Log(st.worstCase)
			t.Logf("the run bound (max_run %v) lowered %d weights in %d cycles", p.MaxRun, st.runCapped, st.runCycles)
			for _, e := range st.first {
				t.Error(e)
			}
			require.Zero(t, st.broken, "cycles outside the max_step rule")
			require.Positive(t, st.runCycles, "the run bound, on by default, must be exercised")
			t.Logf("%d cycles with new connections rare (run_rare)", st.rareCycles)
			if p.RunRare > 1 {
				require.Positive(t, st.rareCycles, "the rare bound must be exercised")
			}
		})
	}
}

// maxStepStats sums up a runMaxStepCycles run.
type maxStepStats struct {
	cycles, writes, checked int
	broken                  int      // servers whose share broke the rule
	first                   []string // the first few of them, with their cycle
	// worst is the largest factor, either way, by which a server's share of
	// the written integer weights moved in one cycle.
	worst     float64
	worstCase string
	rounded   int // servers whose share on the written integers moved further than max_step: rounding
	// weightMoves counts the written weights that moved by more than
	// max_step on the scale where the largest weight before the cycle is
	// max_weight (the rule as the README once worded it), and
	// worstWeight is the largest such factor: for the record, not asserted.
	weightMoves int
	worstWeight float64
	// runCapped counts the weights the run bound lowered (their reason says
	// so), runCycles the cycles with at least one.
	runCapped, runCycles int
	rareCycles           int // cycles planned with new connections rare (run_rare)
}

// runMaxStepCycles runs backends of 2..12 servers, 50 cycles each, until n
// cycles have run, checking every one.
func runMaxStepCycles(t *testing.T, p Policy, n int) maxStepStats {
	t.Helper()
	rng := rand.New(rand.NewPCG(21, uint64(math.Float64bits(p.MaxStep))))
	var st maxStepStats
	for run := 0; st.cycles < n; run++ {
		hp := newHAProxyModel(rng, 2+rng.IntN(11))
		src := &randomLoads{rng: rng, hp: hp}
		b := &Weigher{Name: "be_app", Source: src, Target: hp, Controller: mustController(t, p)}
		written := map[string]int{} // what the Controller was told was written
		for cycle := range 50 {
			now := t0.Add(time.Duration(run*50+cycle) * time.Second)
			src.now = now
			hp.disturb()
			before := hp.snapshot()
			c := RunCycle(context.Background(), b, now, true)
			require.NoError(t, c.Err, "run %d cycle %d", run, cycle)
			where := fmt.Sprintf("run %d cycle %d (%s, max_step %v, deadband %d)", run, cycle, p.Function, p.MaxStep, p.Deadband)
			base := bases(before, written, c.Plan.Reset)
			broken := checkShareStep(p, c.Plan, base, &st)
			st.cycles, st.writes = st.cycles+1, st.writes+len(c.Written)
			st.broken += len(broken)
			for _, e := range broken {
				if len(st.first) < 5 {
					st.first = append(st.first, fmt.Sprintf("%s: %s\n\tbefore %v\n\tloads %v\n\tplan %+v", where, e, base, src.last, c.Plan.Servers))
				}
			}
			countWeightMoves(p, c.Plan, base, &st)
			countRunCaps(c.Plan, &st)
			if c.Plan.RareArrivals {
				st.rareCycles++
			}
			if c.Plan.Reset { // the Controller forgot the weights it wrote (a reset)
				for _, sp := range c.Plan.Servers {
					if sp.Action != ActionSkip && written[sp.Server] > 0 {
						delete(written, sp.Server)
					}
				}
			}
			for _, ch := range c.Written {
				written[ch.Server] = ch.Weight
			}
		}
	}
	return st
}

// bases is what the Controller measures a cycle from: the weight HAProxy
// holds, or the one last written when HAProxy's differs (changed outside),
// unless HAProxy reset every weight to the configuration's (reset: a restart
// or reload), which the cycle starts again from.
func bases(servers []ServerState, written map[string]int, reset bool) map[string]int {
	out := make(map[string]int, len(servers))
	for _, s := range servers {
		out[s.Name] = s.Weight
		// a reset forgets the weights written, not the drains (0)
		if w, ok := written[s.Name]; ok && !(reset && w > 0) && w != s.Weight && s.Weight != 0 {
			out[s.Name] = w
		}
	}
	return out
}

// shareMember is one server of the set the max_step rule covers.
type shareMember struct {
	name     string
	old, new float64 // weight before (the Controller's base) and written
}

// checkShareStep checks the max_step rule on one plan: for the servers in
// service before and after the cycle (not skipped, weight > 0 before and
// after), each one's share of their total weight moves by at most a factor
// max_step, up to rounding to integers. A held plan writes nothing and is
// not checked. The written weight n stands for an
// exact one in [n-½, n+½], and a 1 for one in (0, 1.5] (the floor): a server
// breaks the rule only when no exact weights that round to the written ones
// can keep its share within the bound. It returns what broke, and adds to st
// the servers checked and the largest factor by which a share of the written
// integers moved.
func checkShareStep(p Policy, plan Plan, base map[string]int, st *maxStepStats) (broken []string) {
	if plan.Hold {
		// Nothing is written: a weight that differs from the base was
		// changed outside (a reload), and is set back when the hold ends.
		return nil
	}
	set := shareSet(plan, base)
	if len(set) < 2 {
		return nil
	}
	var oldSum, newSum, lowSum, highSum float64
	for _, m := range set {
		oldSum, newSum = oldSum+m.old, newSum+m.new
		lowSum, highSum = lowSum+lowExact(m.new), highSum+m.new+0.5
	}
	st.checked += len(set)
	for _, m := range set {
		share := m.old / oldSum
		ratio := (m.new / newSum) / share
		if max(ratio, 1/ratio) > st.worst {
			st.worstCase = fmt.Sprintf("%s %v → %v (%s) in %v", m.name, m.old, m.new, reasonOf(plan, m.name), set)
		}
		st.worst = max(st.worst, ratio, 1/ratio)
		if p.MaxStep > 0 && max(ratio, 1/ratio) > p.MaxStep*(1+1e-9) {
			st.rounded++
		}
		if p.MaxStep == 0 {
			continue
		}
		// the largest and smallest shares that exact weights rounding to
		// the written ones can give this server
		hi := (m.new + 0.5) / (m.new + 0.5 + lowSum - lowExact(m.new))
		lo := lowExact(m.new) / (lowExact(m.new) + highSum - (m.new + 0.5))
		if hi < share/p.MaxStep*(1-1e-9) || lo > share*p.MaxStep*(1+1e-9) {
			broken = append(broken, fmt.Sprintf("%s %v → %v: share %.4f → %.4f (x%.3f) outside max_step %v (%s)",
				m.name, m.old, m.new, share, m.new/newSum, ratio, p.MaxStep, reasonOf(plan, m.name)))
		}
	}
	return broken
}

// shareSet is the servers the max_step rule covers in plan: weighted (not
// skipped), with a weight before (base) and after the cycle.
func shareSet(plan Plan, base map[string]int) []shareMember {
	var set []shareMember
	for _, s := range plan.Servers {
		if s.Action != ActionSkip && base[s.Server] > 0 && s.New > 0 {
			set = append(set, shareMember{s.Server, float64(base[s.Server]), float64(s.New)})
		}
	}
	return set
}

// countWeightMoves records the written weights that moved by more than
// max_step on the scale where the largest weight before the cycle is
// max_weight: what the issue measured.
func countWeightMoves(p Policy, plan Plan, base map[string]int, st *maxStepStats) {
	set := shareSet(plan, base)
	top := 0.0
	for _, m := range set {
		top = max(top, m.old)
	}
	for _, m := range set {
		if m.new == m.old || m.new <= 1 || p.MaxStep == 0 {
			continue
		}
		ratio := m.new / (m.old * float64(p.MaxWeight) / top)
		if f := max(ratio, 1/ratio); f > p.MaxStep*(1+1e-9) {
			st.weightMoves++
			st.worstWeight = max(st.worstWeight, f)
		}
	}
}

// countRunCaps counts the weights of plan the run bound lowered.
func countRunCaps(plan Plan, st *maxStepStats) {
	n := 0
	for _, s := range plan.Servers {
		if strings.Contains(s.Reason, ReasonMaxRun) {
			n++
		}
	}
	st.runCapped += n
	if n > 0 {
		st.runCycles++
	}
}

// lowExact is the smallest exact weight that is written as n: n-½, or
// anything above 0 for the floor 1.
func lowExact(n float64) float64 {
	if n <= 1 {
		return 0
	}
	return n - 0.5
}

func reasonOf(plan Plan, server string) string {
	for _, s := range plan.Servers {
		if s.Server == server {
			return s.Reason
		}
	}
	return ""
}

// haproxyModel holds a backend's servers as HAProxy does between cycles:
// integer weights 0..256, admin and operational states, a configured weight
// a reload resets them to. It is the Target of the property test.
type haproxyModel struct {
	mu      sync.Mutex
	rng     *rand.Rand
	servers []ServerState
}

func newHAProxyModel(rng *rand.Rand, n int) *haproxyModel {
	hp := &haproxyModel{rng: rng, servers: make([]ServerState, n)}
	for i := range hp.servers {
		w := 1 // HAProxy's default weight, as most backends start
		if rng.IntN(3) == 0 {
			w = 1 + rng.IntN(MaxWeight)
		}
		hp.servers[i] = ServerState{Name: fmt.Sprintf("s%02d", i), Weight: w, InitialWeight: w,
			Admin: AdminReady, Operational: "up"}
	}
	return hp
}

// disturb changes what an operator or HAProxy itself changes now and then
// between two cycles: drain/maint and back, down and up, a reload.
func (hp *haproxyModel) disturb() {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	for i := range hp.servers {
		s := &hp.servers[i]
		switch r := hp.rng.Float64(); {
		case s.Admin != AdminReady && r < 0.2, s.Operational != "up" && r < 0.3:
			s.Admin, s.Operational = AdminReady, "up"
		case r < 0.01:
			s.Admin = AdminDrain
		case r < 0.02:
			s.Admin = AdminMaint
		case r < 0.03:
			s.Operational = "down"
		}
	}
	// Open connections move between cycles, as the run bound (max_run)
	// reads them: from none (a backend starting) to many.
	for i := range hp.servers {
		if hp.rng.IntN(4) == 0 {
			hp.servers[i].Sessions = hp.rng.IntN(1 + hp.rng.IntN(80))
		}
	}
	if hp.rng.IntN(200) == 0 { // a reload: every weight back to the configuration's
		for i := range hp.servers {
			hp.servers[i].Weight = hp.servers[i].InitialWeight
		}
	}
}

func (hp *haproxyModel) snapshot() []ServerState {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	return slices.Clone(hp.servers)
}

func (hp *haproxyModel) Servers(context.Context) ([]ServerState, error) { return hp.snapshot(), nil }

func (hp *haproxyModel) SetWeights(_ context.Context, changes []Change) error {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	for _, ch := range changes {
		if !ValidWeight(ch.Weight) {
			return fmt.Errorf("weight %d of %s outside 0..%d", ch.Weight, ch.Server, MaxWeight)
		}
		i := slices.IndexFunc(hp.servers, func(s ServerState) bool { return s.Name == ch.Server })
		if i < 0 {
			return &ServerError{Server: ch.Server, Err: fmt.Errorf("no such server")}
		}
		hp.servers[i].Weight = ch.Weight
	}
	return nil
}

// randomLoads is the property test's Source: one point per server per
// cycle, 1..1000, of which about 5 % are bad: NaN, -1, 0, 1e308 or no
// series at all.
type randomLoads struct {
	rng  *rand.Rand
	hp   *haproxyModel
	now  time.Time
	last Loads
}

func (r *randomLoads) Fetch(context.Context, []ServerState) (Loads, error) {
	out := Loads{}
	for _, s := range r.hp.snapshot() {
		v := 1 + 999*r.rng.Float64()
		if r.rng.IntN(20) == 0 {
			bad := []float64{math.NaN(), -1, 0, 1e308, math.Inf(-1)}[r.rng.IntN(5)]
			if math.IsInf(bad, -1) {
				continue // no series for this server
			}
			v = bad
		}
		out[s.Name] = Series{{Time: r.now, Value: v}}
	}
	r.last = out
	return out, nil
}

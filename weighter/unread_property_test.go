package weighter

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPropertyUnreadIsNeverRaisedAsIdle drives backends through Fresh and
// RunCycle, as the daemon does, with a fast reader that reads part of the
// servers only: each cycle about a fifth of them are unread (no address
// the socket table can show, or HAProxy's sessions not found in it), most
// with the 0 B/s and 0 sessions a reader has for a server it cannot see,
// some with any numbers; others are Reset, or have a rate or sessions NaN,
// ±Inf, negative or 0; now and then every server is unread; the external
// source has about 5 % bad points (randomLoads). Weights are carried from
// cycle to cycle by the HAProxy model (drains, downs, reloads). With
// missing: keep, in every cycle:
//   - a server the fast read could not read has no load (never 0) while
//     the fast signal carries the loads;
//   - a server with no load keeps its share of the weights of the servers
//     in service before and after the cycle, or loses some: no exact
//     weights that round to the written ones give it a larger share than
//     it had. An idle server is raised; one that could not be read never
//     is.
//
// Seeds are fixed, so a failure names a run and cycle that reproduce.
func TestPropertyUnreadIsNeverRaisedAsIdle(t *testing.T) {
	for _, tc := range []struct {
		name      string
		calibrate bool
		edit      func(*Policy)
	}{
		{"fast alone", false, func(*Policy) {}},
		{"calibrated", true, func(*Policy) {}},
		{"max_step off deadband 0", true, func(p *Policy) { p.MaxStep, p.Deadband = 0, 0 }},
		{"feedback", false, func(p *Policy) { p.Function = "feedback" }},
		{"normalised-exponential", true, func(p *Policy) { p.Function, p.Aggressiveness = "normalised-exponential", 2 }},
		{"min_coverage 0", false, func(p *Policy) { p.MinCoverage = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			tc.edit(&p)
			st := runUnreadCycles(t, p, tc.calibrate, 3000)
			t.Logf("%d cycles (%d by the fast signal, %d by the source), %d writes; %d unread server-cycles; %d servers without a load checked: "+
				"%d kept their weight on the backend's scale, %d lowered (run bound); %d of them had a larger share of the written weights, the servers with data capped",
				st.cycles, st.fast, st.external, st.writes, st.unread, st.checked, st.held, st.lowered, st.shareGrew)
			for _, e := range st.first {
				t.Error(e)
			}
			require.Zero(t, st.broken, "servers without a reading raised")
			require.Positive(t, st.checked, "no unread server was checked")
			require.Positive(t, st.fast, "the fast signal never carried the loads")
		})
	}
}

// unreadStats sums up a runUnreadCycles run.
type unreadStats struct {
	cycles, fast, external, writes int
	unread                         int // server-cycles the fast read could not read, while it carried the loads
	checked, held, lowered         int // servers without a load checked; kept their weight on the backend's scale; lowered
	shareGrew                      int // of them, those whose share of the written weights grew (others capped)
	broken                         int
	first                          []string
}

// runUnreadCycles runs backends of 2..12 servers, 50 cycles each, until n
// cycles have run, checking every one.
func runUnreadCycles(t *testing.T, p Policy, calibrate bool, n int) unreadStats {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, uint64(len(p.Function))<<8|uint64(math.Float64bits(p.MaxStep))>>52))
	if calibrate {
		rng = rand.New(rand.NewPCG(8, uint64(len(p.Function))<<8|uint64(math.Float64bits(p.MaxStep))>>52))
	}
	var st unreadStats
	for run := 0; st.cycles < n; run++ {
		hp := newHAProxyModel(rng, 2+rng.IntN(11))
		fast := &partialFast{rng: rng, bytes: map[string]float64{}}
		ext := &randomLoads{rng: rng, hp: hp}
		fresh, err := NewFresh(FreshConfig{Fast: fast, External: ext, Calibrate: calibrate,
			Calibration: DefaultCalibration(2 * time.Second), Refresh: 4 * time.Second, Now: func() time.Time { return fast.at }})
		require.NoError(t, err)
		b := &Weigher{Name: "be_app", Source: fresh, Target: hp, Controller: mustController(t, p)}
		written := map[string]int{}
		for cycle := range 50 {
			now := t0.Add(time.Duration(run*50+cycle) * time.Second)
			fast.at, ext.now = now, now
			hp.disturb()
			before := hp.snapshot()
			c := RunCycle(context.Background(), b, now, true)
			require.NoError(t, c.Err, "run %d cycle %d", run, cycle)
			require.NotNil(t, c.Signal)
			st.cycles, st.writes = st.cycles+1, st.writes+len(c.Written)
			where := fmt.Sprintf("run %d cycle %d (%s, max_step %v, calibrate %v, pipeline %s)", run, cycle, p.Function, p.MaxStep, calibrate, c.Signal.Pipeline)
			plan := byServer(c.Plan)
			fastCarried := c.Signal.Pipeline != PipelineExternal
			if fastCarried {
				st.fast++
				for name := range fast.unread {
					st.unread++
					if sp, ok := plan[name]; ok && sp.Action != ActionSkip && !math.IsNaN(sp.Load) {
						st.fail(fmt.Sprintf("%s: %s could not be read (%s) and has load %v: %s", where, name, fast.unread[name], sp.Load, sp.Reason))
					}
				}
			} else {
				st.external++
			}
			noRead := map[string]bool{}
			for _, sp := range c.Plan.Servers {
				_, unread := fast.unread[sp.Server]
				noRead[sp.Server] = math.IsNaN(sp.Load) || fastCarried && unread
			}
			checkNoLoadRaise(c.Plan, bases(before, written, c.Plan.Reset), noRead, where, &st)
			if c.Plan.Reset {
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

func (st *unreadStats) fail(msg string) {
	st.broken++
	if len(st.first) < 5 {
		st.first = append(st.first, msg)
	}
}

// checkNoLoadRaise checks that each server of plan without a reading
// (noRead: its load NaN, for no rate or a bad point, or the fast read could
// not read it while it carried the loads) that has a weight before and after the
// cycle is not raised: its new weight is at most its weight before times
// the factor the whole backend was scaled by (Plan.Scale, which moves no
// traffic), up to rounding (½, and the floor 1). That is what keeping its
// share means in the rule (share.go: x_i = b_i, or lower by its run bound);
// an idle server is raised above it, up to max_step. Its share of the
// written weights may still grow when the servers with data cannot share
// out what they held (their run bound, max_step), which the record counts
// but does not hold against it. A held plan writes nothing.
func checkNoLoadRaise(plan Plan, base map[string]int, noRead map[string]bool, where string, st *unreadStats) {
	if plan.Hold {
		return
	}
	set := shareSet(plan, base)
	var oldSum, newSum float64
	for _, m := range set {
		oldSum, newSum = oldSum+m.old, newSum+m.new
	}
	loads := byServer(plan)
	for _, m := range set {
		if !noRead[m.name] {
			continue
		}
		st.checked++
		scaled := m.old * plan.Scale
		switch {
		case m.new > max(1, scaled+0.5)*(1+1e-9):
			st.fail(fmt.Sprintf("%s: %s has no reading and was raised: %v → %v, the backend scaled x%.4g (%v): %s",
				where, m.name, m.old, m.new, plan.Scale, set, loads[m.name].Reason))
		case m.new < scaled-0.5:
			st.lowered++
		default:
			st.held++
		}
		if len(set) > 1 && m.new/newSum > m.old/oldSum*(1+1e-9) {
			st.shareGrew++
		}
	}
}

// partialFast is the property test's fast reader: a LocalRead a second
// long, each server read, unread, Reset or with bad numbers at random.
// unread are the servers of the last read it could not read, with why.
type partialFast struct {
	rng    *rand.Rand
	at     time.Time
	bytes  map[string]float64
	unread map[string]string
}

func (f *partialFast) ReadLocal(_ context.Context, servers []ServerState) (LocalRead, error) {
	r := LocalRead{At: f.at, Since: f.at.Add(-time.Second), Servers: make(map[string]LocalCounter, len(servers))}
	f.unread = map[string]string{}
	all := f.rng.IntN(25) == 0 // every server unread: the signal says nothing
	for _, s := range servers {
		rate := 1e5 * f.rng.Float64()
		if f.rng.IntN(10) == 0 {
			rate = 0 // read, and idle
		}
		f.bytes[s.Name] += rate
		c := LocalCounter{Bytes: f.bytes[s.Name], Rate: rate, Sessions: float64(f.rng.IntN(20))}
		if f.rng.IntN(4) == 0 { // new connections without a rate of their own, sometimes nonsense
			c.FreshSessions = []float64{0.5, 1, 2.5, c.Sessions, math.NaN(), -1}[f.rng.IntN(6)]
			c.FreshRate = []float64{0, 1, rate / 2, rate, 2 * rate, math.NaN()}[f.rng.IntN(6)]
		}
		switch x := f.rng.IntN(20); {
		case all || x < 3:
			c.Unread = []string{"no IP address the socket table can show", "HAProxy reports sessions the table has none of"}[f.rng.IntN(2)]
			if f.rng.IntN(4) != 0 {
				c.Rate, c.Sessions = 0, 0 // what a reader has for a server it cannot see
			}
			f.unread[s.Name] = c.Unread
		case x < 5:
			c.Reset, c.Rate = true, 0
		case x < 6:
			c.Rate = []float64{math.NaN(), -1, math.Inf(1)}[f.rng.IntN(3)]
		case x < 7:
			c.Sessions = []float64{math.NaN(), -1, math.Inf(1), 0}[f.rng.IntN(4)]
		}
		r.Servers[s.Name] = c
	}
	return r, nil
}

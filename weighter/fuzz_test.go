package weighter

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// floats decodes b as little-endian float64s: any bit pattern, NaN and Inf included.
func floats(b []byte) []float64 {
	out := make([]float64, 0, len(b)/8)
	for ; len(b) >= 8; b = b[8:] {
		out = append(out, math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	return out
}

func floatBytes(xs ...float64) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

// FuzzFunctions: for any valid loads and parameters, LP and NE return one weight
// per load in 1..max_weight, deterministically and monotonically (a strictly
// higher load never gets a strictly higher weight); feedback stays in range.
func FuzzFunctions(f *testing.F) {
	f.Add([]byte{}, 4.0, 1.0, uint8(0))
	f.Add(floatBytes(10, 20, 40, 0), 4.0, 1.0, uint8(1))
	f.Add(floatBytes(5, 5000, 50, 500, 10), 4.0, 2.0, uint8(2))
	f.Add(floatBytes(1e-300, 1e300, 3, 3, 0), 1.5, 7.0, uint8(255))
	f.Fuzz(func(t *testing.T, raw []byte, limit, aggr float64, sel uint8) {
		loads := floats(raw)
		for i, x := range loads {
			if !validLoad(x) {
				loads[i] = math.Abs(float64(i)) // keep the length; invalid loads are Compute's to reject
			}
		}
		p := DefaultPolicy()
		p.LimitingFactor, p.Aggressiveness, p.Gain = limit, aggr, aggr
		p.MaxWeight = 1 + int(sel)%MaxWeight
		p.Function = FunctionNames()[int(sel)%len(Functions)]
		if len(loads) == 0 || p.Validate() != nil {
			return
		}
		current := make([]int, len(loads))
		for i := range current {
			current[i] = int(raw[i]) // 0..255: feedback must cope with 0
		}
		w, err := Compute(p, loads, current)
		require.NoError(t, err)
		again, _ := Compute(p, loads, current)
		require.Equal(t, w, again, "deterministic")
		require.Len(t, w, len(loads))
		for i, x := range w {
			require.True(t, x >= 1 && x <= p.MaxWeight, "weight %d = %d outside 1..%d", i, x, p.MaxWeight)
		}
		if p.Function == "feedback" {
			return
		}
		for i := range loads {
			for j := range loads {
				if loads[i] > loads[j] && w[i] > w[j] {
					t.Fatalf("%s not monotone: load %v → %d but load %v → %d", p.Function, loads[i], w[i], loads[j], w[j])
				}
			}
		}
	})
}

// FuzzController: for any servers, loads and policy switches, over a few
// cycles, every weight is in 0..256, 0 only when we drain (or keep an operator's
// 0), plans are deterministic and marshal to JSON, and no server's share of
// the backend's weight moves by more than max_step (checkShareStep, the rule
// the property tests check).
func FuzzController(f *testing.F) {
	f.Add([]byte{}, []byte{}, uint16(0))
	f.Add(floatBytes(10, 20, 40, 0, 150, math.NaN(), -1), []byte{0, 1, 1, 1, 7, 1, 128, 1, 1, 16, 1, 2}, uint16(8|4))
	f.Add(floatBytes(1, 2, 3, 4, 5, 6, 7, 8), []byte{1, 0, 1, 0, 1, 0, 0, 0}, uint16(2|16|64))
	// found by a review: every weight 256, one server without data, one much lighter:
	// the held server was rescaled by x0.705 and another moved 256 → 91
	f.Add(floatBytes(900, 50, 1000, math.NaN()), []byte{0, 1, 0, 1, 0, 1, 0, 1}, uint16(1))
	// from HAProxy's default weight 1, a point of 1e308 and one of -1
	f.Add(floatBytes(1e308, 10, 500, -1, 3), []byte{1, 0, 1, 0, 1, 0, 1, 0, 1, 0}, uint16(1))
	f.Fuzz(func(t *testing.T, raw []byte, states []byte, flags uint16) {
		p := fuzzPolicy(flags)
		loads := floats(raw)
		servers := fuzzServers(states)
		a, b := mustController(t, p), mustController(t, p)
		for cycle := range 3 {
			now := t0.Add(time.Duration(cycle) * 7 * time.Second)
			l := fuzzLoads(now, loads, len(servers), cycle)
			base := map[string]int{}
			for _, s := range servers {
				base[s.Name] = s.Weight
			}
			pa, pb := a.Plan(now, l, servers), b.Plan(now, l, servers)
			ja, err := json.Marshal(pa)
			require.NoError(t, err)
			jb, _ := json.Marshal(pb)
			require.Equal(t, string(ja), string(jb), "deterministic")
			checkPlan(t, pa, servers)
			if broken := checkShareStep(p, pa, base, &maxStepStats{}); len(broken) > 0 {
				t.Fatalf("cycle %d: %s\nplan %+v", cycle, strings.Join(broken, "\n"), pa.Servers)
			}
			a.Commit(pa.Changes())
			b.Commit(pb.Changes())
			for i := range servers { // the target applies what was set
				if s := pa.Servers[indexOf(pa, servers[i].Name)]; s.Action == ActionSet {
					servers[i].Weight = s.New
				}
			}
		}
	})
}

func fuzzPolicy(flags uint16) Policy {
	p := DefaultPolicy()
	p.Function = FunctionNames()[int(flags)%len(Functions)]
	if flags&4 != 0 {
		p.Missing = MissingMean
	}
	if flags&8 != 0 {
		p.DrainAbove, p.ResumeBelow = 100, 50
	}
	if flags&16 != 0 {
		p.Smoothing = duration.Duration(10 * time.Second)
	}
	if flags&32 != 0 {
		p.Deadband, p.MaxStep = 0, 0
	}
	if flags&64 != 0 {
		p.ManageOperatorStates = true
	}
	p.Aggregate = aggregateNames[int(flags>>7)%len(aggregateNames)]
	p.MinCoverage = float64(flags>>9%8) / 8
	return p
}

// fuzzServers makes one server per 2 bytes: a weight 0..256 and a state.
func fuzzServers(b []byte) []ServerState {
	var out []ServerState
	for i := 0; i+1 < len(b) && len(out) < 64; i += 2 {
		s := ServerState{Name: "s" + string(rune('A'+len(out))), Weight: int(b[i]), Admin: AdminReady, Operational: "up"}
		if b[i+1]&1 != 0 {
			s.Weight = MaxWeight
		}
		s.Admin = []AdminState{AdminReady, AdminReady, AdminDrain, AdminMaint}[b[i+1]>>1&3]
		s.Operational = []string{"up", "up", "down", "stopping"}[b[i+1]>>3&3]
		out = append(out, s)
	}
	return out
}

// fuzzLoads gives server i the values loads[i], loads[i+n], … as a short series
// ending at now, shifted by cycle so the loads change between cycles.
func fuzzLoads(now time.Time, loads []float64, n, cycle int) Loads {
	out := Loads{}
	if n == 0 {
		return out
	}
	for k, v := range loads {
		i := (k + cycle) % n
		name := "s" + string(rune('A'+i))
		out[name] = append(out[name], Point{Time: now.Add(-time.Duration(k) * time.Second), Value: v})
	}
	return out
}

func checkPlan(t *testing.T, plan Plan, servers []ServerState) {
	require.Len(t, plan.Servers, len(servers))
	require.False(t, math.IsNaN(plan.Imbalance) || math.IsNaN(plan.Coverage))
	for _, s := range plan.Servers {
		require.True(t, ValidWeight(s.New), "%s: weight %d", s.Server, s.New)
		if s.New == 0 && !strings.HasPrefix(s.Reason, "drained") {
			require.NotEqual(t, ActionSet, s.Action, "%s set to 0 without drain: %+v", s.Server, s)
			require.Equal(t, 0, s.Current, "%+v", s)
		}
		if plan.Hold {
			require.NotEqual(t, ActionSet, s.Action)
		}
	}
}

func indexOf(p Plan, name string) int {
	for i, s := range p.Servers {
		if s.Server == name {
			return i
		}
	}
	return -1
}

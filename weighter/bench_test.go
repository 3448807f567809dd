package weighter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchBackend is n servers with a 10-point series each, as a source hands
// them over: a name-keyed Loads map and a server list (in name order, or
// shuffled when the target lists them in another order).
func benchBackend(n int, shuffle bool) ([]ServerState, Loads) {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	servers := make([]ServerState, n)
	loads := Loads{}
	for i := range servers {
		name := fmt.Sprintf("srv%05d", i)
		servers[i] = ServerState{Name: name, Weight: 1 + rng.IntN(256), Admin: AdminReady, Operational: "up"}
		s := make(Series, 10)
		for k := range s {
			s[k] = Point{Time: t0.Add(time.Duration(k-9) * 10 * time.Second), Value: rng.ExpFloat64() * 100}
		}
		loads[name] = s
	}
	if shuffle {
		rng.Shuffle(n, func(i, j int) { servers[i], servers[j] = servers[j], servers[i] })
	}
	return servers, loads
}

// BenchmarkPlan measures one Controller.Plan cycle with the default policy
// (limited-proportions, deadband, rate limit) over n servers with a 10-point
// series each, listed in name order (the common case: Plan then only checks
// the order) or shuffled (Plan sorts them). Target: 10,000 servers under 1 ms.
func BenchmarkPlan(b *testing.B) {
	for _, bc := range []struct {
		n       int
		shuffle bool
	}{{10, false}, {1_000, false}, {10_000, false}, {10_000, true}} {
		label := fmt.Sprintf("servers=%d", bc.n)
		if bc.shuffle {
			label += "/shuffled"
		}
		b.Run(label, func(b *testing.B) {
			servers, loads := benchBackend(bc.n, bc.shuffle)
			c := mustController(b, DefaultPolicy())
			b.ReportAllocs()
			for b.Loop() {
				c.Plan(t0, loads, servers)
			}
		})
	}
}

// BenchmarkPlanBusy is BenchmarkPlan over servers that carry 0-200 open
// connections each, so that the run bound (max_run, on by default) searches
// its reference and bounds the written integers every cycle.
func BenchmarkPlanBusy(b *testing.B) {
	for _, n := range []int{10, 1_000, 10_000} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			servers, loads := benchBackend(n, false)
			rng := rand.New(rand.NewPCG(2, uint64(n)))
			for i := range servers {
				servers[i].Sessions = rng.IntN(201)
			}
			c := mustController(b, DefaultPolicy())
			b.ReportAllocs()
			for b.Loop() {
				c.Plan(t0, loads, servers)
			}
		})
	}
}

// BenchmarkPlanFloor measures the part of BenchmarkPlan that any Plan over
// this input pays, whatever its policy: for every server, find its series in
// the name-keyed Loads, read the newest point and write the server's line into
// a new plan. It is what the 10,000-server target is up against: the map
// lookups and the plan's memory, not the weighting.
func BenchmarkPlanFloor(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			servers, loads := benchBackend(n, false)
			b.ReportAllocs()
			for b.Loop() {
				out := make([]ServerPlan, len(servers))
				for i := range servers {
					s := &servers[i]
					load := loads[s.Name]
					out[i] = ServerPlan{Server: s.Name, Load: load[len(load)-1].Value, Current: s.Weight, Raw: s.Weight, New: s.Weight}
				}
			}
		})
	}
}

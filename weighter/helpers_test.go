package weighter

import (
	"math"
	"time"
)

var (
	nan = math.NaN()
	inf = math.Inf(1)
	t0  = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

// up returns ready, up servers with the given weights, named s1, s2, ….
func up(weights ...int) []ServerState {
	out := make([]ServerState, len(weights))
	for i, w := range weights {
		out[i] = ServerState{Name: name(i), Weight: w, InitialWeight: 1, Admin: AdminReady, Operational: "up"}
	}
	return out
}

func name(i int) string { return "s" + string(rune('1'+i)) }

// loadsAt returns one fresh point per server (NaN = no series at all) at time at.
func loadsAt(at time.Time, vals ...float64) Loads {
	l := Loads{}
	for i, v := range vals {
		if !math.IsNaN(v) {
			l[name(i)] = Series{{Time: at, Value: v}}
		}
	}
	return l
}

func mustController(t interface{ Fatal(...any) }, p Policy) *Controller {
	c, err := NewController(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// byServer indexes a plan's servers by name.
func byServer(p Plan) map[string]ServerPlan {
	m := map[string]ServerPlan{}
	for _, s := range p.Servers {
		m[s.Server] = s
	}
	return m
}

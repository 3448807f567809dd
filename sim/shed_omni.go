package sim

import (
	"fmt"
	"math"
	"time"
)

// OmniShed is an omniscient shedder: the reference for what shedding could
// do at a given rate, not something a daemon can run. Every cycle it sees the
// servers' true loads, every open connection's rate and remaining lifetime,
// and where the balancer would place a reconnection now; it closes, on the
// busiest server only, the connection whose move lowers the busiest load the
// most for the longest (gain × remaining lifetime), under a budget of sheds
// per hour per server and the planner's other limits (min age, a cooldown per
// client, one server per cycle). The client reconnects as with any shed.
type OmniShed struct {
	// Above: nothing is shed while the busiest server's true load is at or
	// below Above × the mean.
	Above float64
	// Below, when > 0: nor while it is above Below × the mean (the budget
	// goes to the busiest server's moderate excesses, where one move can
	// bring it under a target, not to its peaks).
	Below float64
	// PerHour is the budget in sheds per hour per server (a token bucket
	// refilled at PerHour × servers per hour, holding at most Burst).
	PerHour float64
	Burst   float64
	// MinAge and Cooldown as in weighter.ShedPolicy.
	MinAge, Cooldown time.Duration
}

// omniState is an OmniShed's budget and the clients it shed.
type omniState struct {
	p       OmniShed
	tokens  float64
	last    float64
	clients map[int]float64 // client → when it was last shed
}

// OmniLabel names an omniscient shedding pipeline by its placement and factors.
func OmniLabel(base string, p OmniShed) string {
	band := fmt.Sprintf("above=%g", p.Above)
	if p.Below > 0 {
		band += fmt.Sprintf(" below=%g", p.Below)
	}
	return fmt.Sprintf("%s omni-shed %s %g/h", base, band, p.PerHour)
}

// OmniPipeline is base (a baseline or candidate pipeline by name) with an
// omniscient shedder p.
func OmniPipeline(base string, p OmniShed) Pipeline {
	var pl Pipeline
	for _, c := range append(FleetBaselines(), CandidatePipelines()...) {
		if c.Name == base {
			pl = c
		}
	}
	pl.Default = false
	pl.Name = OmniLabel(base, p)
	pl.Omni = &p
	return pl
}

// omniCycle is one cycle of the omniscient shedder at now.
func (m *model) omniCycle(now float64) {
	o := m.omni
	o.tokens = math.Min(o.p.Burst, o.tokens+(now-o.last)*o.p.PerHour*float64(m.sc.Servers)/3600)
	o.last = now
	servers := m.lbs[0].b.servers
	loads := make([]float64, len(servers))
	mean, n, top := 0.0, 0, -1
	for i, s := range servers {
		if !s.up {
			continue
		}
		loads[i] = m.trueLoad(i)
		mean += loads[i]
		n++
		if top < 0 || loads[i] > loads[top] {
			top = i
		}
	}
	if n < 2 || !(mean > 0) {
		return
	}
	mean /= float64(n)
	for o.tokens >= 1 && loads[top] > o.p.Above*mean && (o.p.Below <= 0 || loads[top] <= o.p.Below*mean) {
		best, bestScore, bestLB, bestTo := -1, 0.0, -1, -1
		for k, lb := range m.lbs {
			for _, d := range lb.b.departing {
				c := lb.b.conns[d.id]
				if c.server != top || now-lb.since[d.id] < o.p.MinAge.Seconds() {
					continue
				}
				if t, ok := o.clients[lb.client[d.id]]; ok && now-t < o.p.Cooldown.Seconds() {
					continue
				}
				to := m.landing(lb, top, c.rate)
				if to < 0 || to == top {
					continue
				}
				after := 0.0
				for i, s := range servers {
					l := loads[i]
					switch i {
					case top:
						l -= m.cost[i] * c.rate
					case to:
						l += m.cost[i] * c.rate
					}
					if s.up && l > after {
						after = l
					}
				}
				gain := loads[top] - after
				if gain <= 0 {
					continue
				}
				// The gain lasts until the connection would have left anyway
				// (less the reconnect delay): a mean of 1 s.
				if score := gain * math.Max(c.end-now-(reconnectMin+reconnectMax)/2, 0); score > bestScore {
					best, bestScore, bestLB, bestTo = d.id, score, k, to
				}
			}
		}
		if best < 0 {
			return
		}
		lb := m.lbs[bestLB]
		rate := lb.b.conns[best].rate
		o.clients[lb.client[best]] = now
		if m.onOmni != nil {
			m.onOmni(m, now, lb, best, top)
		}
		m.shedConn(lb, best, now)
		o.tokens--
		loads[top] -= m.cost[top] * rate
		loads[bestTo] += m.cost[bestTo] * rate
		next := top
		for i, s := range servers {
			if s.up && loads[i] > loads[next] {
				next = i
			}
		}
		if next != top { // one server per cycle
			return
		}
	}
}

// landing is the server lb would give a connection of this rate now if it
// left server from: the placement's own choice, with the connection gone.
func (m *model) landing(lb *balancer, from int, rate float64) int {
	s := lb.b.servers[from]
	active, load := s.active, s.load
	s.active--
	s.load -= rate
	to := lb.b.pick(lb.b.servers)
	s.active, s.load = active, load
	return to
}

package sim

import "math"

// agent is the agent-check peer most HAProxy users pick instead of a weighter: a
// small agent on every server answers HAProxy's agent-check every few seconds with
// ceil(100 − utilisation)%, seeing only its own server. HAProxy then sets the
// server's weight to that percentage of its configured weight, on every
// balancer alike (each asks the same agent).
//
// Utilisation = 100 × own load over the last report interval / capacity, with
// capacity = AgentCapacity × the scenario's mean per-server load (the expected
// load of Connections connections of the rate distribution's mean, spread evenly,
// times the servers' mean cost, plus their mean background).
type agent struct {
	capacity float64
	last     []float64 // counter at the previous report, per server
	at       float64
}

func newAgent(sc Scenario, str *stream) *agent {
	mean := float64(sc.Connections) * str.meanRate / float64(sc.Servers)
	capacity := sc.AgentCapacity * mean
	if len(sc.Costs) > 0 || len(sc.Background) > 0 {
		c, b := 0.0, 0.0
		for i := range sc.Servers {
			name := serverName(i)
			c += sc.cost(name) / float64(sc.Servers)
			b += sc.Background[name] * mean / float64(sc.Servers)
		}
		capacity = sc.AgentCapacity * (mean*c + b)
	}
	return &agent{capacity: capacity}
}

// report runs every server's agent on what it reads of its server (src) and
// sets the weight it answers on every balancer (lbs); it returns how many
// weights changed.
func (a *agent) report(src meter, lbs []*backend, now float64) int {
	changed := 0
	for i, s := range src.serverList() {
		c := src.counter(i, now)
		if i >= len(a.last) {
			a.last = append(a.last, c) // joined since: first report next round
			continue
		}
		load := (c - a.last[i]) / (now - a.at)
		a.last[i] = c
		if !s.up {
			continue
		}
		pct := math.Ceil(100 - 100*load/a.capacity)
		pct = math.Min(math.Max(pct, 0), 100)
		w := initialWeight * int(pct) / 100 // HAProxy: uweight = iweight × pct / 100
		for _, b := range lbs {
			if w != b.servers[i].weight {
				b.setWeight(i, w)
				changed++
			}
		}
	}
	a.at = now
	return changed
}

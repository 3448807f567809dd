package sim

import "time"

// GoalScenarios are the scenarios the shipped default is chosen on: the default,
// the same with sigma 1.0, and 16 servers with 60 s lifetimes (30 connections each).
func GoalScenarios() []Scenario {
	def := DefaultScenario()
	s1 := DefaultScenario()
	s1.Name, s1.Rate.Sigma = "sigma-1.0", 1.0
	s16 := DefaultScenario()
	s16.Name, s16.Servers, s16.Connections, s16.MeanLife = "16-servers-60s", 16, 480, 60*time.Second
	return []Scenario{def, s1, s16}
}

// Seeds returns the seeds 1..n.
func Seeds(n int) []uint64 {
	out := make([]uint64, max(n, 1))
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// flagFields maps a flag of haproxy-weighter-sim to the scenario field it sets.
var flagFields = map[string]func(dst *Scenario, src Scenario){
	"seed": func(d *Scenario, s Scenario) { d.Seed = s.Seed },
	"duration": func(d *Scenario, s Scenario) {
		d.Duration, d.Events = s.Duration, EventsBefore(d.Events, s.Duration)
	},
	"servers":     func(d *Scenario, s Scenario) { d.Servers = s.Servers },
	"connections": func(d *Scenario, s Scenario) { d.Connections = s.Connections },
	"median":      func(d *Scenario, s Scenario) { d.Rate.Median = s.Rate.Median },
	"sigma":       func(d *Scenario, s Scenario) { d.Rate.Sigma = s.Rate.Sigma },
	"cap":         func(d *Scenario, s Scenario) { d.Rate.Cap = s.Rate.Cap },
	"life":        func(d *Scenario, s Scenario) { d.MeanLife = s.MeanLife },
	"resolution":  func(d *Scenario, s Scenario) { d.Resolution = s.Resolution },
	"rate-window": func(d *Scenario, s Scenario) { d.RateWindow = s.RateWindow },
	"interval":    func(d *Scenario, s Scenario) { d.Interval = s.Interval },
	"delay":       func(d *Scenario, s Scenario) { d.Delay = s.Delay },
	"fast-signal": func(d *Scenario, s Scenario) { d.FastSignal = s.FastSignal },
	"returning":   func(d *Scenario, s Scenario) { d.Returning = s.Returning },
}

// Override copies the field behind the named haproxy-weighter-sim flag from src to dst (a
// scenario file's values give way to the flags the user set); other names are ignored.
func Override(dst *Scenario, src Scenario, flag string) {
	if set, ok := flagFields[flag]; ok {
		set(dst, src)
	}
}

// EventsBefore keeps the events that happen before end (for a shortened --duration).
func EventsBefore(events []Event, end time.Duration) []Event {
	var out []Event
	for _, ev := range events {
		if ev.At < end {
			out = append(out, ev)
		}
	}
	return out
}

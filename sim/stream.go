package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// arrival is one connection of the stream: when it opens, its rate and how long it lives.
// Times are simulated seconds; float64 keeps the inner loop cheap.
type arrival struct {
	At    float64
	Rate  float64
	Life  float64
	Whale bool // one of a whale (or burst) event's connections
	// Server is, plus one, the server a client of Scenario.Clients is on at
	// the start (0: the balancer places it).
	Server int
	// DriftAt is when the client's rate changes to Rate × DriftFactor
	// (Scenario.Drift); 0 = never.
	DriftAt, DriftFactor float64
}

// rateAt is the client's rate at time t.
func (a arrival) rateAt(t float64) float64 {
	if a.DriftAt > 0 && t >= a.DriftAt {
		return a.Rate * a.DriftFactor
	}
	return a.Rate
}

// stream is the connection stream every strategy of a run shares, so their figures
// differ only by placement (common random numbers).
type stream struct {
	arrivals []arrival // in time order; the initial population arrives at 0
	meanRate float64   // mean rate of the ordinary (non-whale) connections
}

// newStream draws the scenario's connections from its seed: an initial population of
// Connections at time 0 (lifetimes are memoryless, so it starts in steady state), then
// Poisson arrivals at Connections/MeanLife per second times the ramp factor, plus whales.
func newStream(sc Scenario) *stream {
	if len(sc.Clients) > 0 {
		return fixedStream(sc)
	}
	rng := rand.New(rand.NewPCG(sc.Seed, 0x5eed))
	life := sc.MeanLife.Seconds()
	s := &stream{}
	sum := 0.0
	add := func(at float64) {
		a := arrival{At: at, Rate: sc.Rate.sample(rng), Life: rng.ExpFloat64() * life}
		sum += a.Rate
		s.arrivals = append(s.arrivals, a)
	}
	// The ramp's moments come from their own stream, so that the clients stay
	// those of the scenario without it.
	ramp := rand.New(rand.NewPCG(sc.Seed, 0x4a3b))
	for range sc.Connections {
		add(ramp.Float64() * sc.Ramp.Seconds())
	}
	base := float64(sc.Connections) / life
	peak := maxRampFactor(sc.Events)
	end := sc.Duration.Seconds()
	if sc.Returning { // the initial clients come back; nobody else arrives
		end = 0
	}
	for t := rng.ExpFloat64() / (base * peak); t < end; t += rng.ExpFloat64() / (base * peak) {
		if rng.Float64()*peak < rampFactor(sc.Events, t) { // thinning
			add(t)
		}
	}
	s.meanRate = sum / float64(len(s.arrivals))
	s.addEventClients(sc)
	slices.SortStableFunc(s.arrivals, func(a, b arrival) int { return cmpFloat(a.At, b.At) })
	s.drift(sc)
	return s
}

// fixedStream is the stream of a scenario of fixed clients
// (Scenario.Clients): each connected at 0 on its server until the end, then
// the event clients; drifts as any.
func fixedStream(sc Scenario) *stream {
	s := &stream{}
	for _, c := range sc.Clients {
		n, _ := strconv.Atoi(strings.TrimPrefix(c.Server, "s"))
		s.arrivals = append(s.arrivals, arrival{Rate: c.Rate, Life: 2 * sc.Duration.Seconds(), Server: n})
		s.meanRate += c.Rate / float64(len(sc.Clients))
	}
	s.addEventClients(sc)
	slices.SortStableFunc(s.arrivals, func(a, b arrival) int { return cmpFloat(a.At, b.At) })
	s.drift(sc)
	return s
}

// addEventClients adds the whales and the bursts' heavy clients. A burst
// draws its arrival times and lifetimes from its own random stream, so that
// the ordinary clients stay those of a scenario without it.
func (s *stream) addEventClients(sc Scenario) {
	for k, ev := range sc.Events {
		switch ev.Kind {
		case EventWhale:
			for range ev.Count {
				s.arrivals = append(s.arrivals, arrival{At: ev.At.Seconds(), Rate: ev.Rate, Life: ev.Life.Seconds(), Whale: true})
			}
		case EventBurst:
			rng := rand.New(rand.NewPCG(sc.Seed, 0xb0257+uint64(k)))
			for range ev.Count {
				life := ev.Life.Seconds()
				if life == 0 {
					life = rng.ExpFloat64() * sc.MeanLife.Seconds()
				}
				at := ev.At.Seconds() + rng.Float64()*ev.Over.Seconds()
				s.arrivals = append(s.arrivals, arrival{At: at, Rate: ev.Rate, Life: life, Whale: true})
			}
		}
	}
}

// drift gives a share of the clients (Scenario.Drift) a change of rate at a
// uniform point of their lifetime, from its own random stream.
func (s *stream) drift(sc Scenario) {
	d := sc.Drift
	if d == nil || d.Share == 0 || d.Factor == 1 {
		return
	}
	rng := rand.New(rand.NewPCG(sc.Seed, 0xd21f7))
	for i := range s.arrivals {
		a := &s.arrivals[i]
		u, at, up := rng.Float64(), rng.Float64(), rng.Float64() < 0.5
		if u >= d.Share {
			continue
		}
		a.DriftAt, a.DriftFactor = a.At+at*a.Life, d.Factor
		if d.To > 0 {
			a.DriftAt = d.From.Seconds() + at*(d.To-d.From).Seconds()
			if a.DriftAt < a.At { // the moment fell before the client connected: no drift, as in the bench
				a.DriftAt, a.DriftFactor = 0, 0
				continue
			}
		}
		if !up {
			a.DriftFactor = 1 / d.Factor
		}
		if a.DriftAt <= 0 { // 0 means never: a client of the initial population drifting at once
			a.DriftAt = 1e-9
		}
	}
}

// rampFactor is the product of every ramp's factor at time t.
func rampFactor(events []Event, t float64) float64 {
	f := 1.0
	for _, ev := range events {
		if ev.Kind != EventRamp || t < ev.At.Seconds() {
			continue
		}
		over := ev.Over.Seconds()
		if over == 0 || t >= ev.At.Seconds()+over {
			f *= ev.Factor
			continue
		}
		f *= 1 + (ev.Factor-1)*(t-ev.At.Seconds())/over
	}
	return f
}

func maxRampFactor(events []Event) float64 {
	f := 1.0
	for _, ev := range events {
		if ev.Kind == EventRamp {
			f *= math.Max(1, ev.Factor)
		}
	}
	return f
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

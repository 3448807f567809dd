package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// epoch is the wall time simulated second 0 maps to (fixed, so runs are reproducible).
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// window is one sampling window's true per-server average loads.
type window struct {
	end    float64
	loads  []float64 // per server; NaN when the server was not up
	picked []int     // new connections placed per server during the window
	whales []int     // fresh-data model: the server each whale is on at the end (-1 = none)
}

// trace is everything one strategy's run recorded.
type trace struct {
	windows []window
	cycles  int // weight-setting cycles (weighter or agent rounds)
	writes  int // weights actually changed
}

// runner simulates one strategy over one scenario.
type runner struct {
	sc      Scenario
	st      Strategy
	str     *stream
	b       *backend
	mon     *monitor
	agent   *agent
	joined  []float64 // when each server joined
	events  []Event   // add/remove, in time order
	tr      trace
	onStep  func(b *backend, now float64) // test hook
	nextArr int
	client  []int             // per connection, the arrival (client) it carries
	now     float64           // the model's time
	daemon  *weighter.Backend // the weighter's cycle (weighter strategies)
	// back are the clients of a restart coming back, by time.
	back       []reconnect
	restartRng *rand.Rand
}

func newRunner(sc Scenario, st Strategy, str *stream) (*runner, error) {
	r := &runner{sc: sc, st: st, str: str, mon: newMonitor(sc), restartRng: rand.New(rand.NewPCG(sc.Seed, 0x7e57a27))}
	r.mon.perConn = st.PerConn
	r.b = newBackend(sc.Servers, initialWeight, st.picker())
	r.joined = make([]float64, sc.Servers)
	for _, ev := range sc.Events {
		if ev.Kind == EventAdd || ev.Kind == EventRemove || ev.Kind == EventRestart {
			r.events = append(r.events, ev)
		}
	}
	slices.SortStableFunc(r.events, func(a, b Event) int { return cmpFloat(a.At.Seconds(), b.At.Seconds()) })
	switch st.Kind {
	case KindWeighter:
		ctrl, err := weighter.NewController(st.Policy)
		if err != nil {
			return nil, fmt.Errorf("strategy %s: %w", st.Name, err)
		}
		// A daemon weighing by its source alone (fast_signal: off).
		r.daemon = &weighter.Backend{Name: simBackend, Source: monitorSource{r}, Target: &simTarget{b: r.b}, Controller: ctrl}
	case KindAgent:
		r.agent = newAgent(sc, str)
	}
	return r, nil
}

// run advances the model step by step to the scenario's end.
func (r *runner) run() (trace, error) {
	step := r.sc.Step.Seconds()
	n := int(r.sc.Duration / r.sc.Step)
	every := func(d time.Duration) int { return int(d / r.sc.Step) }
	win, res, ivl, agt := every(r.sc.Window), every(r.sc.Resolution), every(r.sc.Interval), every(r.sc.AgentEvery)
	r.advance(0)
	r.mon.scrape(r.b, 0)
	last := r.snapshot()
	for k := 1; k <= n; k++ {
		now := float64(k) * step
		if err := r.advance(now); err != nil {
			return r.tr, err
		}
		r.now = now
		if r.onStep != nil {
			r.onStep(r.b, now)
		}
		if k%win == 0 {
			last = r.sampleWindow(now, last)
		}
		if k%res == 0 {
			r.mon.scrape(r.b, now)
		}
		if r.daemon != nil && k%ivl == 0 {
			r.cycle(now)
		}
		if r.agent != nil && k%agt == 0 {
			r.tr.cycles++
			r.tr.writes += r.agent.report(r.b, []*backend{r.b}, now)
		}
	}
	return r.tr, nil
}

// advance processes, in time order, every arrival, departure and server event up to t.
func (r *runner) advance(t float64) error {
	for {
		arr, dep, ev, drift, rec := math.Inf(1), r.b.nextEnd(), math.Inf(1), r.b.nextDrift(), math.Inf(1)
		if r.nextArr < len(r.str.arrivals) {
			arr = r.str.arrivals[r.nextArr].At
		}
		if len(r.events) > 0 {
			ev = r.events[0].At.Seconds()
		}
		if len(r.back) > 0 {
			rec = r.back[0].at
		}
		switch {
		case ev <= t && ev <= arr && ev <= dep && ev <= drift && ev <= rec:
			if err := r.serverEvent(r.events[0], ev); err != nil {
				return err
			}
			r.events = r.events[1:]
		case dep <= t && dep <= arr && dep <= drift && dep <= rec:
			r.b.closeUntil(dep)
		case drift <= t && drift <= arr && drift <= rec:
			r.b.applyDrift()
		case rec <= t && rec <= arr:
			c := r.back[0]
			r.back = r.back[1:]
			r.place(c.client, c.at, c.at+c.remaining)
		case arr <= t:
			a := r.str.arrivals[r.nextArr]
			r.nextArr++
			r.place(r.nextArr-1, a.At, a.At+a.Life)
		default:
			return nil
		}
	}
}

// place connects client (an arrival's index) at now until end, at its
// rate of that moment, with its change of rate to come if before end.
func (r *runner) place(client int, now, end float64) {
	a := r.str.arrivals[client]
	r.b.open(a.rateAt(now), end, now)
	if a.DriftAt > now && a.DriftAt < end {
		r.b.scheduleDrift(len(r.b.conns)-1, a.DriftAt, a.rateAt(a.DriftAt))
	}
	r.client = append(r.client, client)
}

// restart is the balancer's HAProxy restarting (fleet.restart): weights
// back to the configuration's, every client reconnecting within over.
func (r *runner) restart(ev Event, now float64) {
	over := ev.Over.Seconds()
	if over == 0 {
		over = defaultRestartOver
	}
	for i := range r.b.servers {
		r.b.setWeight(i, initialWeight)
	}
	var open []int
	for _, d := range r.b.departing {
		open = append(open, d.id)
	}
	slices.Sort(open)
	for _, id := range open {
		c := &r.b.conns[id]
		c.open = false
		r.b.detach(c.server, c.rate, now)
		back := reconnect{at: now + over*r.restartRng.Float64(), remaining: c.end - now, client: r.client[id]}
		i, _ := slices.BinarySearchFunc(r.back, back.at, func(p reconnect, at float64) int {
			if p.at <= at {
				return -1
			}
			return 1
		})
		r.back = slices.Insert(r.back, i, back)
	}
	r.b.departing = r.b.departing[:0]
}

func (r *runner) serverEvent(ev Event, now float64) error {
	if ev.Kind == EventRestart {
		r.restart(ev, now)
		return nil
	}
	if ev.Kind == EventAdd {
		r.b.addServer(initialWeight, now)
		r.joined = append(r.joined, now)
		return nil
	}
	i := slices.IndexFunc(r.b.servers, func(s *server) bool { return s.name == ev.Server })
	if i < 0 || !r.b.servers[i].up {
		return fmt.Errorf("event remove at %v: no server %q up", ev.At, ev.Server)
	}
	r.b.remove(i, now)
	return nil
}

// snapshot is every server's counter and placed connections at the start of a window.
type snapshot struct {
	at      float64
	counter []float64
	picked  []int
}

func (r *runner) snapshot() snapshot {
	s := snapshot{at: 0}
	for i, sv := range r.b.servers {
		s.counter = append(s.counter, r.b.counter(i, s.at))
		s.picked = append(s.picked, sv.picked)
	}
	return s
}

// sampleWindow records the window ending now and returns the start of the next one.
func (r *runner) sampleWindow(now float64, prev snapshot) snapshot {
	w := window{end: now}
	next := snapshot{at: now}
	for i, s := range r.b.servers {
		c := r.b.counter(i, now)
		c0, p0, from := 0.0, 0, math.Max(prev.at, r.joined[i])
		if i < len(prev.counter) {
			c0, p0 = prev.counter[i], prev.picked[i]
		}
		load := math.NaN()
		if s.up && now > from {
			load = (c - c0) / (now - from)
		}
		w.loads = append(w.loads, load)
		w.picked = append(w.picked, s.picked-p0)
		next.counter = append(next.counter, c)
		next.picked = append(next.picked, s.picked)
	}
	r.tr.windows = append(r.tr.windows, w)
	return next
}

// cycle is one weighter cycle: the daemon's own weighter.RunCycle, applied,
// its loads from the monitoring pipeline (monitorSource).
func (r *runner) cycle(now float64) {
	c := weighter.RunCycle(context.Background(), r.daemon, simTime(epoch, now), true)
	r.tr.cycles++
	r.tr.writes += len(c.Written)
}

package sim

import (
	"context"
	"errors"
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
	whales []int     // the server each whale is on at the end (-1 = none)
}

// trace is everything one strategy's run recorded.
type trace struct {
	windows []window
	cycles  int // weight-setting cycles (weighter or agent rounds)
	writes  int // weights actually changed
}

// Fast signals: what HAProxy tells a daemon on the balancer every cycle about the
// load its own connections put on each server.
const (
	// SignalLive is `show sess all`: every open stream's byte total, advancing
	// continuously; the rate over the last interval is exact.
	SignalLive = "live"
	// SignalContstats is `show stat` with `option contstats`: an open
	// connection's bytes reach the server's counter in lumps every contstatsTick
	// seconds, each connection at its own phase (from when it was placed).
	SignalContstats = "contstats"
	// SignalClosed is `show stat` without contstats: a connection's bytes are
	// counted when it closes.
	SignalClosed = "closed"
)

// contstatsTick is how often an open connection's counters advance with option
// contstats (measured on HAProxy 2.6: about every 5 s).
const contstatsTick = 5.0

// signal is the scenario's fast signal (live when unset).
func (sc Scenario) signal() string {
	if sc.FastSignal == "" {
		return SignalLive
	}
	return sc.FastSignal
}

// shares is the balancers' client shares (one balancer when unset).
func (sc Scenario) shares() []float64 {
	if len(sc.Balancers) == 0 {
		return []float64{1}
	}
	return sc.Balancers
}

func (sc Scenario) validateFleet() error {
	for name, c := range sc.Costs {
		if !(c > 0) || math.IsInf(c, 0) {
			return fmt.Errorf("scenario: costs: %s must be a positive number", name)
		}
	}
	for name, b := range sc.Background {
		if !(b >= 0) || math.IsInf(b, 0) {
			return fmt.Errorf("scenario: background: %s must not be negative", name)
		}
	}
	for _, s := range sc.Balancers {
		if !(s > 0) || math.IsInf(s, 0) {
			return errors.New("scenario: balancers: every share must be positive")
		}
	}
	if o := sc.ExternalOutage; o != nil && (o.From < 0 || o.To <= o.From) {
		return errors.New("scenario: external_outage needs 0 <= from < to")
	}
	switch sc.FastSignal {
	case "", SignalLive, SignalContstats, SignalClosed:
	default:
		return fmt.Errorf("scenario: fast_signal %q (want %s, %s or %s)", sc.FastSignal, SignalLive, SignalContstats, SignalClosed)
	}
	return nil
}

// owners assigns every arrival of the stream to a balancer by the scenario's
// shares, from its own random stream (the arrivals stay those of newStream).
func owners(sc Scenario, str *stream) []int {
	shares := sc.shares()
	out := make([]int, len(str.arrivals))
	if len(shares) == 1 {
		return out
	}
	total := 0.0
	for _, s := range shares {
		total += s
	}
	rng := rand.New(rand.NewPCG(sc.Seed, 0xba1a))
	for i := range out {
		u, k := rng.Float64()*total, 0
		for k < len(shares)-1 && u >= shares[k] {
			u -= shares[k]
			k++
		}
		out[i] = k
	}
	return out
}

// balancer is one HAProxy in front of the shared servers, with its own daemon.
type balancer struct {
	b     *backend
	since []float64 // per connection: when it joined its current server
	// client is per connection the arrival (client) it carries: a shed
	// client reconnects as a new connection of the same client.
	client []int
	// daemon is the daemon's backend (weighter.RunCycle's), nil unless the
	// pipeline is a weighter; reader its fast reader (nil when it weighs by
	// the external source alone).
	daemon *weighter.Weigher
	reader *simReader
}

// model is the simulator's engine: one pipeline (Run's strategies are
// pipelines too) over one scenario. It holds the scenario's balancers (one
// unless it lists shares), each an HAProxy backend placing its own clients,
// with its daemon; the servers behind them all, with their costs and
// background; the agent-check peer and the monitoring system, which read
// those servers; and the events to come.
type model struct {
	sc       Scenario
	pl       Pipeline
	str      *stream
	owner    []int
	lbs      []*balancer
	cost     []float64 // per server
	bg       []float64 // per server, datapoints/s of cost-1 traffic
	joined   []float64
	events   []Event
	nextArr  int
	mon      *monitor // the external metric: scrapes of the true counters
	agent    *agent   // the agent-check peer (KindAgent)
	signal   string
	tr       trace
	now      float64                              // the model's time, the daemons' clock
	interval time.Duration                        // the daemons' interval
	onStep   func(m *model, now float64)          // test hook
	onCycle  func(lb *balancer, c weighter.Cycle) // test hook: each daemon cycle
	// onOmni is a test hook: the omniscient shedder closes connection id of
	// lb, on server top, at now.
	onOmni  func(m *model, now float64, lb *balancer, id, top int)
	shed    *shedState      // nil unless the pipeline sheds
	omni    *omniState      // nil unless the pipeline has an omniscient shedder
	whales  []int           // arrival indices of the whales
	whaleAt map[int]connRef // whale arrival → its current connection
	// pending are the clients coming back (shed, or their balancer
	// restarted), by time; restartRng draws a restart's reconnect times.
	pending    []reconnect
	restartRng *rand.Rand
	returns    map[int]uint64 // per client, its returns so far (Scenario.Returning)
}

func newModel(sc Scenario, pl Pipeline, str *stream, owner []int) (*model, error) {
	m := &model{sc: sc, pl: pl, str: str, owner: owner, mon: newMonitor(sc), signal: sc.signal(), interval: pl.interval(sc),
		restartRng: rand.New(rand.NewPCG(sc.Seed, 0x7e57a27))}
	m.mon.perConn = pl.PerConn
	if pl.Signal != "" {
		m.signal = pl.Signal
	}
	mean := float64(sc.Connections) * str.meanRate / float64(sc.Servers) // per server, cost 1
	for i := range sc.Servers {
		m.addServerState(serverName(i), 0, mean)
	}
	if pl.Kind == KindAgent {
		m.agent = newAgent(sc, str)
	}
	for _, ev := range sc.Events {
		if ev.Kind == EventAdd || ev.Kind == EventRemove || ev.Kind == EventRestart {
			m.events = append(m.events, ev)
		}
	}
	slices.SortStableFunc(m.events, func(a, b Event) int { return cmpFloat(a.At.Seconds(), b.At.Seconds()) })
	for k := range sc.shares() {
		lb := &balancer{b: newBackend(sc.Servers, initialWeight, m.picker(k))}
		if pl.Pin != nil && pl.Kind == KindWeighter { // the HAProxy of a daemon that pins has a stick table
			lb.b.pins = map[int]int{}
		}
		m.lbs = append(m.lbs, lb)
	}
	if pl.Kind == KindWeighter {
		if err := m.newDaemons(); err != nil {
			return nil, err
		}
	}
	m.initShed()
	return m, nil
}

// cost is the named server's cost per datapoint (Costs; 1 when unset).
func (sc Scenario) cost(name string) float64 {
	if v, ok := sc.Costs[name]; ok {
		return v
	}
	return 1
}

// addServerState records a server's cost, background and join time.
func (m *model) addServerState(name string, now, mean float64) {
	m.cost = append(m.cost, m.sc.cost(name))
	m.bg = append(m.bg, m.sc.Background[name]*mean)
	m.joined = append(m.joined, now)
}

// trueLoad is server i's load now: cost × its connections' rates on every
// balancer + background.
func (m *model) trueLoad(i int) float64 {
	sum := 0.0
	for _, lb := range m.lbs {
		sum += lb.b.servers[i].load
	}
	return m.cost[i]*sum + m.bg[i]
}

// The model's servers are what the monitoring system scrapes and the agents
// read (a meter).
var _ meter = (*model)(nil)

// serverList is the servers (every balancer lists the same ones).
func (m *model) serverList() []*server { return m.lbs[0].b.servers }

// counter is server i's cumulative true load at now.
func (m *model) counter(i int, now float64) float64 {
	sum := 0.0
	for _, lb := range m.lbs {
		sum += lb.b.counter(i, now)
	}
	return m.cost[i]*sum + m.bg[i]*(now-m.joined[i])
}

// connSeconds is server i's cumulative connection-seconds at now, over
// every balancer.
func (m *model) connSeconds(i int, now float64) float64 {
	sum := 0.0
	for _, lb := range m.lbs {
		sum += lb.b.connSeconds(i, now)
	}
	return sum
}

// backends is every balancer's backend.
func (m *model) backends() []*backend {
	out := make([]*backend, len(m.lbs))
	for k, lb := range m.lbs {
		out[k] = lb.b
	}
	return out
}

// picker is balancer k's placement: the oracle's, or the pipeline's HAProxy
// algorithm (leastconn unless it says).
func (m *model) picker(k int) picker {
	switch {
	case m.pl.Kind == KindOracle:
		return m.pickOracle
	case m.pl.Placement == PlacementRandom2:
		return pickRandom2(rand.New(rand.NewPCG(m.sc.Seed, 0x2a2d0+uint64(k))))
	case m.pl.Kind == KindRoundrobin || m.pl.Placement == PlacementRoundrobin:
		return pickRoundrobin
	}
	return pickLeastconn
}

// pickOracle places a connection on the server with the least true load, the
// best any placement-only method can do without moving connections.
func (m *model) pickOracle(servers []*server) int {
	best, bestLoad := -1, 0.0
	for i, s := range servers {
		if !s.up {
			continue
		}
		if l := m.trueLoad(i); best < 0 || l < bestLoad {
			best, bestLoad = i, l
		}
	}
	return best
}

func (m *model) run() (trace, error) {
	sc := m.sc
	step := sc.Step.Seconds()
	n := int(sc.Duration / sc.Step)
	every := func(d time.Duration) int { return int(d / sc.Step) }
	win, res, ivl, agt := every(sc.Window), every(sc.Resolution), every(m.interval), every(sc.AgentEvery)
	if err := m.advance(0); err != nil {
		return m.tr, err
	}
	m.mon.scrape(m, 0)
	last := m.snapshot(0)
	for k := 1; k <= n; k++ {
		now := float64(k) * step
		if err := m.advance(now); err != nil {
			return m.tr, err
		}
		m.now = now
		if m.onStep != nil {
			m.onStep(m, now)
		}
		if k%win == 0 {
			last = m.sampleWindow(now, last)
		}
		if k%res == 0 {
			m.mon.scrape(m, now)
		}
		switch {
		case m.pl.Kind == KindWeighter:
			// Each balancer's daemon runs its cycle at its own phase: daemons
			// started independently do not cycle together.
			for b, lb := range m.lbs {
				if (k-m.phase(b, ivl))%ivl == 0 {
					m.cycle(lb, now)
				}
			}
		case m.pl.Kind == KindAgent && k%agt == 0:
			m.tr.cycles += len(m.lbs)
			m.tr.writes += m.agent.report(m, m.backends(), now)
		}
		if m.omni != nil && k%ivl == 0 {
			m.omniCycle(now)
		}
	}
	return m.tr, nil
}

// advance processes, in time order, every arrival, departure, change of
// rate and server event up to t.
func (m *model) advance(t float64) error {
	for {
		arr, ev, rec := math.Inf(1), math.Inf(1), m.nextReconnect()
		dep, which := math.Inf(1), -1
		drift, drifting := math.Inf(1), -1
		for j, lb := range m.lbs {
			if e := lb.b.nextEnd(); e < dep {
				dep, which = e, j
			}
			if d := lb.b.nextDrift(); d < drift {
				drift, drifting = d, j
			}
		}
		if m.nextArr < len(m.str.arrivals) {
			arr = m.str.arrivals[m.nextArr].At
		}
		if len(m.events) > 0 {
			ev = m.events[0].At.Seconds()
		}
		switch {
		case ev <= t && ev <= arr && ev <= dep && ev <= rec && ev <= drift:
			if err := m.serverEvent(m.events[0], ev); err != nil {
				return err
			}
			m.events = m.events[1:]
		case dep <= t && dep <= arr && dep <= rec && dep <= drift:
			ended := m.lbs[which].b.closeUntil(dep)
			if m.sc.Returning {
				for _, id := range ended {
					m.comeBack(m.lbs[which], id, dep)
				}
			}
		case drift <= t && drift <= arr && drift <= rec:
			m.lbs[drifting].b.applyDrift()
		case rec <= t && rec <= arr:
			m.reconnect()
		case arr <= t:
			a := m.str.arrivals[m.nextArr]
			m.nextArr++
			m.place(m.owner[m.nextArr-1], m.nextArr-1, a.At, a.At+a.Life)
		default:
			return nil
		}
	}
}

// place connects client (an arrival's index) through balancer k at now
// until end, at its rate of that moment, with its change of rate to come
// (Scenario.Drift) if it falls before end.
func (m *model) place(k, client int, now, end float64) {
	a := m.str.arrivals[client]
	lb := m.lbs[k]
	if a.Server > 0 && now == a.At { // a fixed client, where it was at the start
		lb.b.openOn(a.Server-1, client, a.rateAt(now), end, now)
	} else {
		lb.b.open(client, a.rateAt(now), end, now)
	}
	id := len(lb.b.conns) - 1
	if a.DriftAt > now && a.DriftAt < end {
		lb.b.scheduleDrift(id, a.DriftAt, a.rateAt(a.DriftAt))
	}
	lb.since = append(lb.since, now)
	lb.client = append(lb.client, client)
	if a.Whale {
		m.whaleAt[client] = connRef{lb: k, id: id}
	}
}

// restart is the restart of a balancer's HAProxy: its runtime weights go
// back to the configuration's (a reload without a server-state file), and
// every client it carries reconnects within the event's over (5 s when 0),
// placed by the weights of that moment.
func (m *model) restart(ev Event, now float64) {
	over := ev.Over.Seconds()
	if over == 0 {
		over = defaultRestartOver
	}
	lb := m.lbs[ev.Balancer]
	for i := range lb.b.servers {
		lb.b.setWeight(i, initialWeight)
	}
	if lb.b.pins != nil && !ev.Peers { // the stick table lives in the process
		clear(lb.b.pins)
	}
	var open []int
	for _, d := range lb.b.departing {
		open = append(open, d.id)
	}
	slices.Sort(open)
	lb.b.departing = lb.b.departing[:0] // every one of them closes
	for _, id := range open {
		c := &lb.b.conns[id]
		c.open = false
		lb.b.detach(c.server, c.rate, now)
		if lb.reader != nil && lb.reader.signal == SignalLive {
			lb.reader.closedUnseen(c.server, c.rate, lb.since[id], now)
		}
		m.queueReconnect(lb, id, now+over*m.restartRng.Float64(), now)
	}
}

// comeBack queues the return of the client of lb's connection id, which
// ended at now (Scenario.Returning): after 0.1-2 s, for a new lifetime. The
// draws are the client's own (its index and how often it came back), so
// that every pipeline sees the same returns whatever it sheds.
func (m *model) comeBack(lb *balancer, id int, now float64) {
	client := lb.client[id]
	if m.returns == nil {
		m.returns = map[int]uint64{}
	}
	m.returns[client]++
	rng := rand.New(rand.NewPCG(m.sc.Seed^0x2e7022, uint64(client)<<24|m.returns[client]))
	at := now + reconnectMin + (reconnectMax-reconnectMin)*rng.Float64()
	m.queueReturn(reconnect{at: at, remaining: rng.ExpFloat64() * m.sc.MeanLife.Seconds(), lb: slices.Index(m.lbs, lb), client: client})
}

// defaultRestartOver is the span a restarted balancer's clients reconnect
// within, seconds, when the event does not say.
const defaultRestartOver = 5.0

func (m *model) serverEvent(ev Event, now float64) error {
	if ev.Kind == EventRestart {
		m.restart(ev, now)
		return nil
	}
	if ev.Kind == EventAdd {
		for _, lb := range m.lbs {
			lb.b.addServer(initialWeight, now)
		}
		mean := float64(m.sc.Connections) * m.str.meanRate / float64(m.sc.Servers)
		m.addServerState(m.lbs[0].b.servers[len(m.lbs[0].b.servers)-1].name, now, mean)
		return nil
	}
	i := slices.IndexFunc(m.lbs[0].b.servers, func(s *server) bool { return s.name == ev.Server })
	if i < 0 || !m.lbs[0].b.servers[i].up {
		return fmt.Errorf("event remove at %v: no server %q up", ev.At, ev.Server)
	}
	for _, lb := range m.lbs {
		var moved []int
		for id, c := range lb.b.conns {
			if c.open && c.server == i {
				moved = append(moved, id)
			}
		}
		lb.b.remove(i, now)
		for _, id := range moved {
			lb.since[id] = now
		}
	}
	return nil
}

// snapshot is every server's counter and placed connections at the start of a window.
type snapshot struct {
	at      float64
	counter []float64
	picked  []int
}

func (m *model) snapshot(at float64) snapshot {
	s := snapshot{at: at}
	for i := range m.lbs[0].b.servers {
		s.counter = append(s.counter, m.counter(i, at))
		s.picked = append(s.picked, m.picked(i))
	}
	return s
}

func (m *model) picked(i int) int {
	n := 0
	for _, lb := range m.lbs {
		n += lb.b.servers[i].picked
	}
	return n
}

// sampleWindow records the true loads of the window ending now.
func (m *model) sampleWindow(now float64, prev snapshot) snapshot {
	w := window{end: now}
	next := snapshot{at: now}
	for i, s := range m.lbs[0].b.servers {
		c, p := m.counter(i, now), m.picked(i)
		c0, p0, from := 0.0, 0, math.Max(prev.at, m.joined[i])
		if i < len(prev.counter) {
			c0, p0 = prev.counter[i], prev.picked[i]
		}
		load := math.NaN()
		if s.up && now > from {
			load = (c - c0) / (now - from)
		}
		w.loads = append(w.loads, load)
		w.picked = append(w.picked, p-p0)
		next.counter = append(next.counter, c)
		next.picked = append(next.picked, p)
	}
	w.whales = m.whaleServers()
	m.tr.windows = append(m.tr.windows, w)
	return next
}

// external is what the external source returns at now: the newest rate points
// of the true load visible by then, per up server.
func (m *model) external(now float64) weighter.Loads {
	return m.mon.loads(m, now, epoch)
}

// cycle is one daemon cycle on one balancer: the daemon's own
// weighter.RunCycle, applied, over the balancer's fakes (daemon.go).
func (m *model) cycle(lb *balancer, now float64) {
	c := weighter.RunCycle(context.Background(), lb.daemon, simTime(epoch, now), true)
	if m.onCycle != nil {
		m.onCycle(lb, c)
	}
	m.tr.cycles++
	m.tr.writes += len(c.Written)
}

// phase is balancer b's cycle offset in steps: the daemons spread evenly
// over the interval (with one balancer, none).
func (m *model) phase(b, ivl int) int {
	return b * ivl / len(m.lbs)
}

// peerPoll is the daemon's poll of a peer, as a share of the interval
// (daemon.timingFor).
const peerPoll = 0.25

func (m *model) fallbacks() int {
	n := 0
	for _, lb := range m.lbs {
		n += lb.b.fallbacks
	}
	return n
}

package sim

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Session shedding in the fresh-data model (docs/shedding.md): a daemon whose
// pipeline has a Shed policy has a weighter.Shedder in its cycle; its fast
// reader lists the open connections with their rates (bytes/s, from two
// reads), and what the cycle plans it closes through the simulated target
// (daemon.go). The client reconnects after a delay, with the same rate and
// the rest of its lifetime, and HAProxy places it by the weights of that
// moment.

// Reconnect delay of a shed client, uniform between these (seconds).
const (
	reconnectMin = 0.1
	reconnectMax = 2.0
)

// Bytes in flight when a session is closed: what sits in the socket buffers,
// modelled as the last inFlightSpan seconds of its traffic (bytesPerLine
// bytes per datapoint), at most maxInFlight (one 64 KiB buffer).
const (
	inFlightSpan = 0.1
	maxInFlight  = 64 << 10
)

// bytesInFlight is the data a shed connection of this rate (datapoints/s) may lose.
func bytesInFlight(rate float64) float64 {
	return math.Min(maxInFlight, rate*bytesPerLine*inFlightSpan)
}

// connRef names one connection of one balancer.
type connRef struct{ lb, id int }

// reconnect is a client coming back (shed, or its balancer restarted).
type reconnect struct {
	at, remaining float64
	lb, client    int
}

// shedState is a shedding pipeline's reconnect delays and counts.
type shedState struct {
	rng   *rand.Rand
	count map[string]int
	bytes []float64 // in flight at each shed after the warmup
}

// ShedFigures are a shedding pipeline's costs over the scored time (after the warmup).
type ShedFigures struct {
	Sheds int `json:"sheds"`
	// PerHourPerServer is sheds per hour divided by the scenario's servers;
	// MaxPerHourOneServer is the most any one server had, per hour.
	PerHourPerServer    float64 `json:"sheds_per_hour_per_server"`
	MaxPerHourOneServer float64 `json:"max_sheds_per_hour_one_server"`
	// Bytes in flight at a shed (bytesInFlight): mean and largest.
	BytesInFlightMean float64 `json:"bytes_in_flight_mean"`
	BytesInFlightMax  float64 `json:"bytes_in_flight_max"`
	// WhaleRecovery is, per whale, the seconds from its arrival until the first
	// 10 s window (after it) in which its server was under 1.5 × the mean (nil: not while it lived).
	WhaleRecovery []*float64 `json:"whale_recovery_seconds"`
	// LinesLost is what was in flight at the sheds (bytesInFlight), in
	// lines: what a client that does not resend loses.
	LinesLost float64 `json:"-"`
}

func (m *model) initShed() {
	m.whaleAt = map[int]connRef{}
	m.whales = whaleIndices(m.str)
	if m.pl.Shed != nil && m.pl.Kind == KindWeighter || m.pl.Omni != nil {
		m.shed = &shedState{rng: rand.New(rand.NewPCG(m.sc.Seed, 0x5bed)), count: map[string]int{}}
	}
	if o := m.pl.Omni; o != nil {
		m.omni = &omniState{p: *o, tokens: o.Burst, clients: map[int]float64{}}
	}
}

func whaleIndices(str *stream) []int {
	var out []int
	for i, a := range str.arrivals {
		if a.Whale {
			out = append(out, i)
		}
	}
	return out
}

func whaleArrivals(str *stream) []arrival {
	var out []arrival
	for _, i := range whaleIndices(str) {
		out = append(out, str.arrivals[i])
	}
	return out
}

// nextReconnect is when the next client (shed, or of a restarted
// balancer) reconnects (+Inf when none).
func (m *model) nextReconnect() float64 {
	if len(m.pending) == 0 {
		return math.Inf(1)
	}
	return m.pending[0].at
}

// reconnect places the next reconnecting client again through its balancer,
// at its rate of that moment (a drift may have fallen while it was away).
func (m *model) reconnect() {
	r := m.pending[0]
	m.pending = m.pending[1:]
	m.place(r.lb, r.client, r.at, r.at+r.remaining)
}

// shedConn closes connection id of lb at now; its client comes back after a delay.
func (m *model) shedConn(lb *balancer, id int, now float64) {
	c := lb.b.conns[id]
	m.closeConn(lb, id, now)
	if now >= m.sc.Warmup.Seconds() {
		m.shed.count[lb.b.servers[c.server].name]++
		m.shed.bytes = append(m.shed.bytes, bytesInFlight(c.rate))
	}
	m.queueReconnect(lb, id, now+reconnectMin+(reconnectMax-reconnectMin)*m.shed.rng.Float64(), now)
}

// closeConn ends connection id of lb at now, before its time.
func (m *model) closeConn(lb *balancer, id int, now float64) {
	c := &lb.b.conns[id]
	c.open = false
	if i := slices.IndexFunc(lb.b.departing, func(d departure) bool { return d.id == id }); i >= 0 {
		heap.Remove(&lb.b.departing, i)
	}
	lb.b.detach(c.server, c.rate, now)
}

// queueReconnect brings the client of lb's closed connection id back at
// at, with the rest of its lifetime (counted from now, when it was closed).
func (m *model) queueReconnect(lb *balancer, id int, at, now float64) {
	m.queueReturn(reconnect{at: at, remaining: lb.b.conns[id].end - now, lb: slices.Index(m.lbs, lb), client: lb.client[id]})
}

// queueReturn queues r in time order.
func (m *model) queueReturn(r reconnect) {
	i, _ := slices.BinarySearchFunc(m.pending, r.at, func(p reconnect, at float64) int {
		if p.at <= at { // equal times keep the order they were queued in
			return -1
		}
		return 1
	})
	m.pending = slices.Insert(m.pending, i, r)
}

// whaleServers is the server each whale is on now (-1 while it is not connected).
func (m *model) whaleServers() []int {
	if len(m.whales) == 0 {
		return nil
	}
	out := make([]int, len(m.whales))
	for k, a := range m.whales {
		out[k] = -1
		if ref, ok := m.whaleAt[a]; ok {
			if c := m.lbs[ref.lb].b.conns[ref.id]; c.open {
				out[k] = c.server
			}
		}
	}
	return out
}

// shedFigures are the pipeline's shedding costs (nil when it does not shed).
func (m *model) shedFigures() *ShedFigures {
	if m.shed == nil {
		return nil
	}
	hours := (m.sc.Duration - m.sc.Warmup).Hours()
	out := &ShedFigures{WhaleRecovery: whaleRecovery(m.sc, m.tr, whaleArrivals(m.str))}
	for _, n := range m.shed.count {
		out.Sheds += n
		out.MaxPerHourOneServer = math.Max(out.MaxPerHourOneServer, float64(n)/hours)
	}
	out.PerHourPerServer = float64(out.Sheds) / hours / float64(m.sc.Servers)
	for _, b := range m.shed.bytes {
		out.LinesLost += b / bytesPerLine
		out.BytesInFlightMean += b / float64(len(m.shed.bytes))
		out.BytesInFlightMax = math.Max(out.BytesInFlightMax, b)
	}
	return out
}

// whaleAbove is the max/mean a whale's server must come back under.
const whaleAbove = 1.5

// whaleRecovery is, per whale, the time from its arrival until the end of the
// first whole window after it in which the server it was on at the window's
// end carried less than whaleAbove × the mean; nil when that did not happen
// while it lived.
func whaleRecovery(sc Scenario, tr trace, whales []arrival) []*float64 {
	out := make([]*float64, len(whales))
	for k, a := range whales {
		for _, w := range tr.windows {
			if w.end-sc.Window.Seconds() < a.At-1e-9 || k >= len(w.whales) || w.whales[k] < 0 {
				continue
			}
			if w.end > a.At+a.Life {
				break
			}
			mean, n := 0.0, 0
			for _, l := range w.loads {
				if !math.IsNaN(l) {
					mean += l
					n++
				}
			}
			mean /= float64(n)
			if l := w.loads[w.whales[k]]; !math.IsNaN(l) && mean > 0 && l < whaleAbove*mean {
				d := w.end - a.At
				out[k] = &d
				break
			}
		}
	}
	return out
}

// ShedPipelineSuffix names a pipeline's shedding variant: "fleet×ratio shed".
const ShedPipelineSuffix = " shed"

// ShedPipeline is the recommended pipeline with shedding by p, named name
// ("" = RecommendedPipeline + ShedPipelineSuffix).
func ShedPipeline(name string, p weighter.ShedPolicy) Pipeline {
	all := CandidatePipelines()
	pl := all[slices.IndexFunc(all, func(p Pipeline) bool { return p.Name == RecommendedPipeline })]
	pl.Default = false
	pl.Name = name
	if name == "" {
		pl.Name = RecommendedPipeline + ShedPipelineSuffix
	}
	pl.Shed = &p
	return pl
}

// ShedPipelines are the shedding pipelines --pipelines accepts by name (not
// part of "all"): the recommended pipeline with weighter.DefaultShed.
func ShedPipelines() []Pipeline {
	return []Pipeline{ShedPipeline("", weighter.DefaultShed())}
}

// WhaleScenario is the default scenario's traffic and events, prepared as the
// fresh-data scenarios are (2 s interval, Prometheus 15 s / 30 s), with four
// long-lived whales more: two of 5,000/s at minute 8 for 20 min and two of
// 4,000/s at minute 35 for 20 min (file: examples/scenarios/shed/whales.yaml).
func WhaleScenario() Scenario {
	sc := FreshScenarios()[3] // fresh-default
	sc.Name = "whales"
	sc.Events = append(slices.Clone(sc.Events),
		Event{At: 8 * time.Minute, Kind: EventWhale, Count: 2, Rate: 5000, Life: 20 * time.Minute},
		Event{At: 35 * time.Minute, Kind: EventWhale, Count: 2, Rate: 4000, Life: 20 * time.Minute},
	)
	return sc
}

// ShedScenarios are the scenarios shedding is judged on: the three goal
// scenarios prepared for fresh data (fresh-default, fresh-sigma-1.0,
// fresh-16-servers-60s) and WhaleScenario.
func ShedScenarios() []Scenario {
	return append(slices.Clone(FreshScenarios()[3:]), WhaleScenario())
}

// ShedCell is one pipeline's seed-mean figures on one scenario.
type ShedCell struct {
	P50, P90, GapP50 float64
	// Sheds per hour per server (mean over seeds) and the most one server had
	// in any seed; bytes in flight per shed, mean and largest.
	PerHour, MaxPerHour float64
	BytesMean, BytesMax float64
	Sheds               bool // the pipeline sheds
	// WhaleRecovery: mean over seeds of the slowest whale's recovery
	// (seconds), and the slowest of all; NaN without whales; +Inf: a whale's
	// server never came under 1.5 × the mean.
	WhaleMean, WhaleWorst float64
	// Herd: the most heavy clients of one burst on one server right after
	// it (burstHerd), mean over the bursts and seeds, and the most in any;
	// NaN without bursts.
	Herd, HerdWorst float64
	// LostPerHour is the lines in flight at the sheds, per hour (mean over seeds).
	LostPerHour float64
	// SeedP50 and SeedP90 are each seed's figures, in the order of the seeds:
	// how far one seed is from another is what a few seeds can decide.
	SeedP50, SeedP90 []float64
}

// ShedResult is a shedding comparison: per pipeline, per scenario.
type ShedResult struct {
	Scenarios []Scenario
	Names     []string
	Cells     [][]ShedCell // [pipeline][scenario]
	Seeds     int
}

// CompareShed runs the pipelines on every scenario with each seed (RunFleet).
func CompareShed(scenarios []Scenario, seeds []uint64, pipelines []Pipeline) (*ShedResult, error) {
	res := &ShedResult{Scenarios: scenarios, Seeds: len(seeds)}
	for si, sc := range scenarios {
		var acc []ShedCell
		var figs []Figures
		for _, seed := range seeds {
			sc.Seed = seed
			rep, err := RunFleet(sc, pipelines)
			if err != nil {
				return nil, fmt.Errorf("%s seed %d: %w", sc.Name, seed, err)
			}
			if si == 0 && res.Names == nil {
				for _, f := range rep.Strategies {
					res.Names = append(res.Names, f.Strategy)
				}
				res.Cells = make([][]ShedCell, len(rep.Strategies))
			}
			figs = addFigures(figs, rep.Strategies, 1/float64(len(seeds)))
			if acc == nil {
				acc = make([]ShedCell, len(rep.Strategies))
				for i := range acc {
					acc[i].WhaleWorst, acc[i].Herd, acc[i].HerdWorst = math.NaN(), math.NaN(), math.NaN()
				}
			}
			w := 1 / float64(len(seeds))
			for i, f := range rep.Strategies {
				c := &acc[i]
				c.SeedP50, c.SeedP90 = append(c.SeedP50, f.P50), append(c.SeedP90, f.P90)
				if herd := burstHerd(sc, rep.traces[i], rep.whales); len(herd) > 0 {
					if math.IsNaN(c.Herd) {
						c.Herd, c.HerdWorst = 0, 0
					}
					for _, h := range herd {
						c.Herd += float64(h) * w / float64(len(herd))
						c.HerdWorst = math.Max(c.HerdWorst, float64(h))
					}
				}
				rec := whaleRecovery(sc, rep.traces[i], rep.whales)
				slow := math.NaN()
				for _, r := range rec {
					v := math.Inf(1)
					if r != nil {
						v = *r
					}
					if math.IsNaN(slow) || v > slow {
						slow = v
					}
				}
				c.WhaleMean += slow * w
				if !math.IsNaN(slow) && (math.IsNaN(c.WhaleWorst) || slow > c.WhaleWorst) {
					c.WhaleWorst = slow
				}
				if s := f.Shed; s != nil {
					c.Sheds = true
					c.PerHour += s.PerHourPerServer * w
					c.MaxPerHour = math.Max(c.MaxPerHour, s.MaxPerHourOneServer)
					c.BytesMean += s.BytesInFlightMean * w
					c.BytesMax = math.Max(c.BytesMax, s.BytesInFlightMax)
					c.LostPerHour += s.LinesLost / (sc.Duration - sc.Warmup).Hours() * w
				}
			}
		}
		var lc, or Figures
		for _, f := range figs {
			switch f.Strategy {
			case "leastconn":
				lc = f
			case "oracle":
				or = f
			}
		}
		for i, f := range figs {
			c := acc[i]
			c.P50, c.P90, c.GapP50 = f.P50, f.P90, gapClosed(lc.P50, or.P50, f.P50)
			res.Cells[i] = append(res.Cells[i], c)
		}
	}
	return res, nil
}

// Cell returns the named pipeline's cells (nil when absent).
func (r *ShedResult) Cell(name string) []ShedCell {
	for i, n := range r.Names {
		if n == name {
			return r.Cells[i]
		}
	}
	return nil
}

// WriteMarkdown writes one table per figure group: p50 / p90 (gap) per
// scenario; then sheds per hour per server (most on one server) and bytes in
// flight per shed (mean / largest); then the slowest whale's recovery.
func (r *ShedResult) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	head := func(title string) {
		fmt.Fprintf(&b, "| %s |", title)
		for _, sc := range r.Scenarios {
			fmt.Fprintf(&b, " %s |", strings.TrimPrefix(sc.Name, "fresh-"))
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(r.Scenarios)) + "\n")
	}
	head("p50 / p90 (gap p50)")
	for i, name := range r.Names {
		fmt.Fprintf(&b, "| %s |", name)
		for _, c := range r.Cells[i] {
			fmt.Fprintf(&b, " %.3f / %.3f (%s) |", c.P50, c.P90, pct(c.GapP50))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	head("sheds/h/server (most on one server) · bytes in flight per shed mean / max")
	for i, name := range r.Names {
		if len(r.Cells[i]) == 0 || !r.Cells[i][0].Sheds {
			continue
		}
		fmt.Fprintf(&b, "| %s |", name)
		for _, c := range r.Cells[i] {
			fmt.Fprintf(&b, " %.2f (%.1f) · %.0f / %.0f B |", c.PerHour, c.MaxPerHour, c.BytesMean, c.BytesMax)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	head(fmt.Sprintf("slowest whale's server back under %.1f× mean, s (mean over seeds / worst)", whaleAbove))
	for i, name := range r.Names {
		fmt.Fprintf(&b, "| %s |", name)
		for _, c := range r.Cells[i] {
			fmt.Fprintf(&b, " %s / %s |", secs(c.WhaleMean), secs(c.WhaleWorst))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func secs(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case math.IsInf(x, 1):
		return "never"
	}
	return fmt.Sprintf("%.0f", x)
}

// ShedLabel names a shed policy by its factors.
func ShedLabel(p weighter.ShedPolicy) string {
	return fmt.Sprintf("shed above=%g for=%d pm=%d share=%g age=%v cool=%v progress=%g",
		p.Above, p.For, p.MaxPerMinute, p.MaxShare, p.MinAge, p.Cooldown, p.Progress)
}

// ShedGrid is the grid of shed factors the sweep compares: above 1.3-2,
// for 1-2 cycles, 2-8 per minute; max_share 2 %, min_age 10 s, cooldown
// 10 min and progress 0 throughout (an earlier sweep found max_share 2 or 5 %
// and progress 0 or 0.1 to change little: the per-minute cap binds first).
func ShedGrid() []weighter.ShedPolicy {
	var out []weighter.ShedPolicy
	for _, above := range []float64{1.3, 1.5, 1.75, 2} {
		for _, n := range []int{1, 2} {
			for _, pm := range []int{2, 4, 8} {
				p := weighter.DefaultShed()
				p.Above, p.For, p.MaxPerMinute, p.MaxShare = above, n, pm, 0.02
				p.MinAge, p.Cooldown, p.Progress = duration.Duration(10*time.Second), duration.Duration(10*time.Minute), 0
				out = append(out, p)
			}
		}
	}
	return out
}

// UnboundedShed sheds as often as the model lets it (above 1.1 × the mean
// for one cycle, 30 per minute, 10 % of the sessions per cycle, any age, no
// cooldown): not a setting, the reference for what shedding could do at all.
func UnboundedShed() weighter.ShedPolicy {
	return weighter.ShedPolicy{Above: 1.1, For: 1, MaxPerMinute: 30, MaxShare: 0.1}
}

// ShedComparison is what --shed compares: the baselines, the recommended
// pipeline without and with shedding (weighter.DefaultShed), and with
// UnboundedShed ("… shed unbounded"); then the references of what shedding
// could do at the goal's rate, OmniPipelines.
func ShedComparison() []Pipeline {
	out := append(FleetBaselines(), CandidatePipelines()[0])
	all := CandidatePipelines()
	out[len(out)-1] = all[slices.IndexFunc(all, func(p Pipeline) bool { return p.Name == RecommendedPipeline })]
	out = append(out, ShedPipelines()...)
	out = append(out, ShedPipeline(RecommendedPipeline+ShedPipelineSuffix+" unbounded", UnboundedShed()))
	return append(out, OmniPipelines(ShedGoalMaxPerHour)...)
}

// OmniGoal is the omniscient shedder at perHour sheds per hour per server,
// with the limits of weighter.DefaultShed where they apply (4 at once, min
// age 10 s, cooldown 10 min) and a threshold of 1.2 × the mean.
func OmniGoal(perHour float64) OmniShed {
	d := weighter.DefaultShed()
	return OmniShed{Above: 1.2, PerHour: perHour, Burst: float64(d.MaxPerMinute), MinAge: time.Duration(d.MinAge), Cooldown: time.Duration(d.Cooldown)}
}

// OmniPipelines are the omniscient shedder at perHour on the oracle's
// placement and on the recommended pipeline's.
func OmniPipelines(perHour float64) []Pipeline {
	return []Pipeline{OmniPipeline("oracle", OmniGoal(perHour)), OmniPipeline(RecommendedPipeline, OmniGoal(perHour))}
}

// ShedGoalMaxPerHour is the most sheds per hour per server the goal allows
// on the default scenario (the mean and the busiest server). The other goals
// on ShedScenarios: the recommended pipeline with shedding under the oracle's
// p50 on every scenario, and every whale's server under 1.5 × the mean within
// one mean connection lifetime.
const ShedGoalMaxPerHour = 6.0

// ShedVerdict is one pipeline's standing against the goal.
type ShedVerdict struct {
	BelowOracle []bool // per scenario: p50 under the oracle's
	RateOK      bool   // default scenario: sheds/h/server ≤ 6, also on the busiest server
	WhalesOK    []bool // per scenario: slowest whale (every seed) ≤ mean life; true without whales
}

// Verdict judges pipeline i; scenario 0 must be the default.
func (r *ShedResult) Verdict(i int) ShedVerdict {
	var v ShedVerdict
	or := r.Cell("oracle")
	for si, c := range r.Cells[i] {
		v.BelowOracle = append(v.BelowOracle, or != nil && c.P50 < or[si].P50)
		life := r.Scenarios[si].MeanLife.Seconds()
		v.WhalesOK = append(v.WhalesOK, math.IsNaN(c.WhaleWorst) || c.WhaleWorst <= life)
	}
	if len(r.Cells[i]) > 0 {
		c := r.Cells[i][0]
		v.RateOK = c.PerHour <= ShedGoalMaxPerHour && c.MaxPerHour <= ShedGoalMaxPerHour
	}
	return v
}

// Passes counts the goals met: one per scenario below the oracle, the rate, one per scenario for whales.
func (v ShedVerdict) Passes() (n, of int) {
	for _, b := range append(slices.Clone(v.BelowOracle), v.WhalesOK...) {
		if b {
			n++
		}
	}
	if v.RateOK {
		n++
	}
	return n, len(v.BelowOracle) + len(v.WhalesOK) + 1
}

// WriteSweep writes the shedding pipelines ranked by goals met, then by the
// mean p50 over the scenarios: p50 per scenario (✓ under the oracle), sheds
// per hour per server on the default (busiest server), the slowest whale's
// worst recovery per scenario with whales. top bounds the rows (0 = all).
func (r *ShedResult) WriteSweep(w io.Writer, top int) error {
	var b strings.Builder
	b.WriteString("| pipeline |")
	for _, sc := range r.Scenarios {
		fmt.Fprintf(&b, " %s p50 |", strings.TrimPrefix(sc.Name, "fresh-"))
	}
	fmt.Fprintf(&b, " sheds/h/server %s (busiest) |", strings.TrimPrefix(r.Scenarios[0].Name, "fresh-"))
	for _, sc := range r.Scenarios {
		fmt.Fprintf(&b, " whale %s s |", strings.TrimPrefix(sc.Name, "fresh-"))
	}
	b.WriteString(" goals |\n|---|" + strings.Repeat("---|", 2*len(r.Scenarios)+2) + "\n")
	type row struct {
		i, pass int
		mean    float64
	}
	var rows []row
	for i := range r.Names {
		n, _ := r.Verdict(i).Passes()
		m := 0.0
		for _, c := range r.Cells[i] {
			m += c.P50 / float64(len(r.Cells[i]))
		}
		rows = append(rows, row{i, n, m})
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		if a.pass != b.pass {
			return b.pass - a.pass
		}
		return cmpFloat(a.mean, b.mean)
	})
	if top > 0 && len(rows) > top {
		rows = rows[:top]
	}
	for _, rw := range rows {
		v := r.Verdict(rw.i)
		fmt.Fprintf(&b, "| %s |", r.Names[rw.i])
		for si, c := range r.Cells[rw.i] {
			mark := ""
			if v.BelowOracle[si] {
				mark = " ✓"
			}
			fmt.Fprintf(&b, " %.3f%s |", c.P50, mark)
		}
		c := r.Cells[rw.i][0]
		if c.Sheds {
			fmt.Fprintf(&b, " %.2f (%.1f) |", c.PerHour, c.MaxPerHour)
		} else {
			b.WriteString(" – |")
		}
		for _, c := range r.Cells[rw.i] {
			fmt.Fprintf(&b, " %s |", secs(c.WhaleWorst))
		}
		n, of := v.Passes()
		fmt.Fprintf(&b, " %d/%d |\n", n, of)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// OmniScanRates are the budgets (sheds per hour per server) at which the
// sweep runs the omniscient shedder on the recommended pipeline's placement
// beyond the goal's: how many sheds the medians would need.
var OmniScanRates = []float64{12, 24, 48, 96}

// ShedSweepPipelines is what --shed-sweep compares: the baselines, the
// recommended pipeline, one shedding row per ShedGrid point, and the
// omniscient shedder at the goal's rate (OmniPipelines) and at OmniScanRates.
func ShedSweepPipelines() []Pipeline {
	out := ShedComparison()[:len(FleetBaselines())+1]
	for _, p := range ShedGrid() {
		out = append(out, ShedPipeline(ShedLabel(p), p))
	}
	out = append(out, OmniPipelines(ShedGoalMaxPerHour)...)
	for _, r := range OmniScanRates {
		out = append(out, OmniPipeline(RecommendedPipeline, OmniGoal(r)))
	}
	return out
}

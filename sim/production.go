package sim

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The production world (docs/research/production-world.md): connections that live
// for hours, heavy clients that connect together, balancers that restart,
// rates that drift while a connection lives, and many connections. The lab
// world (FreshScenarios) has 240 connections living 30 s that arrive one by
// one, where churn repairs any pile-up within a lifetime; here nothing does
// but the next arrivals, or shedding.

// Worlds a comparison runs on (haproxy-weighter-sim --world).
const (
	WorldProduction = "production"
	WorldLab        = "lab"
	WorldAll        = "all"
)

// WorldScenarios are the scenarios of a world: production
// (ProductionScenarios), lab (the six of FreshScenarios) or all.
func WorldScenarios(world string) ([]Scenario, error) {
	switch world {
	case WorldProduction:
		return ProductionScenarios(), nil
	case WorldLab:
		return FreshScenarios(), nil
	case WorldAll:
		return append(FreshScenarios(), ProductionScenarios()...), nil
	}
	return nil, fmt.Errorf("unknown world %q (want %s, %s or %s)", world, WorldProduction, WorldLab, WorldAll)
}

// LongLivedScenario is the base of the production world: the lab's 8
// servers and 240 clients of lognormal rates (median 35/s, sigma 1.5, cap
// 5,000/s), each living an hour on average, simulated 4 h after a 20 min
// warmup; the daemon every 2 s, Prometheus every 15 s with rate over 30 s.
// No events.
func LongLivedScenario() Scenario {
	sc := DefaultScenario()
	sc.Name = "long-lived"
	sc.MeanLife = time.Hour
	sc.Duration = 4*time.Hour + 20*time.Minute
	sc.Warmup = 20 * time.Minute
	sc.Interval = 2 * time.Second
	sc.Events = nil
	Externals()[0].Apply(&sc)
	return sc
}

// BurstScenario is the long-lived world with seven bursts of heavy clients
// (10-50× the median rate of 35/s), each burst connecting within one second,
// every 30 min from minute 40: 3 × 25×, 2 × 50×, 4 × 20×, 5 × 15×, 6 × 12×,
// 8 × 10×, 3 × 40×. The heavy clients live as long as any (1 h on average).
func BurstScenario() Scenario {
	sc := LongLivedScenario()
	sc.Name = "burst"
	med := sc.Rate.Median
	for i, b := range []struct {
		count int
		times float64
	}{{3, 25}, {2, 50}, {4, 20}, {5, 15}, {6, 12}, {8, 10}, {3, 40}} {
		sc.Events = append(sc.Events, Event{At: 40*time.Minute + time.Duration(i)*30*time.Minute, Kind: EventBurst,
			Count: b.count, Rate: b.times * med, Over: time.Second})
	}
	return sc
}

// QuickBurstScenario is the bench on a real HAProxy as a
// simulation: the long-lived world's 240 clients, all connected at the
// start, three heavy clients of 25× the median rate connecting together at
// 180 s, 6 min scored from the start. Weights that have had three minutes to
// spread apart, and no arrival since to test them, meet the burst.
func QuickBurstScenario() Scenario {
	sc := LongLivedScenario()
	sc.Name = "burst-6m"
	sc.Duration, sc.Warmup = 6*time.Minute, 0
	sc.Events = []Event{{At: 3 * time.Minute, Kind: EventBurst, Count: 3, Rate: 25 * sc.Rate.Median, Over: time.Second}}
	return sc
}

// RestartScenario is the long-lived world behind three balancers (50/30/20 %
// of the clients), the first of which restarts at minute 60 and at minute
// 150: its weights go back to the configuration's and every client it
// carries reconnects within 5 s (a reconnect storm).
func RestartScenario() Scenario {
	sc := LongLivedScenario()
	sc.Name = "restart"
	sc.Balancers = []float64{0.5, 0.3, 0.2}
	sc.Events = []Event{
		{At: 60 * time.Minute, Kind: EventRestart, Over: 5 * time.Second},
		{At: 150 * time.Minute, Kind: EventRestart, Over: 5 * time.Second},
	}
	return sc
}

// DriftScenario is the long-lived world where 30 % of the clients change
// rate once in mid-life, half ×10, half ÷10.
func DriftScenario() Scenario {
	sc := LongLivedScenario()
	sc.Name = "drift"
	sc.Drift = &Drift{Share: 0.3, Factor: 10}
	return sc
}

// QuickDriftScenario is the bench's -scenario drift on a real HAProxy as a
// simulation: the long-lived world's 240 clients connecting over the first
// minute, each placed by the weights of its moment; 30 % of the clients
// change rate ×10 or ÷10 at a uniform moment between 60 s and 6 min if
// connected then; scored from 60 s to 6 min. The rates' cap is the bench's,
// 50× the median (the bench's 2,000 lines/s over its median 40). Every drift
// of an hour's life falls within five minutes, which no placement can
// answer: the oracle's p90 is leastconn's give or take what a seed draws
// (docs/research/production-world.md section 7). It is not one of the world's
// scenarios: at the few seeds a world comparison runs, its verdict is a coin
// (examples/scenarios/drift-6m.yaml runs it).
func QuickDriftScenario() Scenario {
	sc := LongLivedScenario()
	sc.Name = "drift-6m"
	sc.Duration, sc.Warmup, sc.Ramp = 6*time.Minute, time.Minute, time.Minute
	sc.Rate.Cap = 50 * sc.Rate.Median
	sc.Drift = &Drift{Share: 0.3, Factor: 10, From: time.Minute, To: 6 * time.Minute}
	return sc
}

// ManyScenario is 20,000 connections on 32 servers, living 20 min on
// average, simulated 1 h after a 20 min warmup (shorter than the other
// production scenarios: a cycle with shedding lists every open session).
func ManyScenario() Scenario {
	sc := LongLivedScenario()
	sc.Name = "many"
	sc.Servers, sc.Connections = 32, 20000
	sc.MeanLife = 20 * time.Minute
	sc.Duration = 80 * time.Minute
	return sc
}

// ProductionScenarios are the production world's scenarios (files in
// examples/scenarios/production/).
func ProductionScenarios() []Scenario {
	return []Scenario{LongLivedScenario(), QuickBurstScenario(), BurstScenario(), RestartScenario(), DriftScenario(), ManyScenario()}
}

// Names of the production world's arms.
const (
	ShippedShedName = ShippedName + " + shed"
	Random2Suffix   = " random(2)"
)

// ShippedShedPipeline is the shipped daemon with shedding by p.
func ShippedShedPipeline(name string, p weighter.ShedPolicy) Pipeline {
	pl := ShippedPipeline()
	pl.Name, pl.Default, pl.Shed = name, false, &p
	return pl
}

// ProductionArms are the arms of the production world side by side: plain
// leastconn, the placement oracle, the shipped default (starred) and the
// shipped default with shedding at weighter.DefaultShed.
func ProductionArms() []Pipeline {
	return []Pipeline{
		{Name: "leastconn", Kind: KindLeastconn},
		{Name: "oracle", Kind: KindOracle},
		ShippedPipeline(),
		ShippedShedPipeline(ShippedShedName, weighter.DefaultShed()),
	}
}

// Names of the pin arms: the shipped daemon pinning heavy clients
// (weighter.DefaultPin), without and with shedding (weighter.DefaultShed).
const (
	ShippedPinName     = ShippedName + " + pin"
	ShippedPinShedName = ShippedName + " + pin + shed"
)

// ShippedPinPipeline is the shipped daemon pinning by pin, shedding by shed
// when not nil.
func ShippedPinPipeline(name string, pin weighter.PinPolicy, shed *weighter.ShedPolicy) Pipeline {
	pl := ShippedPipeline()
	pl.Name, pl.Default, pl.Pin, pl.Shed = name, false, &pin, shed
	return pl
}

// PinArms are the production world's arms and the shipped daemon pinning,
// without and with shedding (docs/research/pinning-simulator.md).
func PinArms() []Pipeline {
	shed := weighter.DefaultShed()
	return append(ProductionArms(),
		ShippedPinPipeline(ShippedPinName, weighter.DefaultPin(), nil),
		ShippedPinPipeline(ShippedPinShedName, weighter.DefaultPin(), &shed))
}

// Random2Arms are HAProxy's `balance random(2)` without weights and under
// the shipped daemon's weights.
func Random2Arms() []Pipeline {
	sh := ShippedPipeline()
	sh.Name, sh.Default, sh.Placement = ShippedName+Random2Suffix, false, PlacementRandom2
	return []Pipeline{{Name: "random(2)", Kind: KindLeastconn, Placement: PlacementRandom2}, sh}
}

// WriteWorld writes the world comparison as Markdown: per scenario p50 /
// p90 (gap closed on p50); then per pipeline whether it is never less even
// than leastconn (p50 and p90 on every scenario) and its sheds per hour per
// server (mean over the scenarios, most in one).
func (r *ShedResult) WriteWorld(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| p50 / p90 (gap p50) |")
	for _, sc := range r.Scenarios {
		fmt.Fprintf(&b, " %s |", strings.TrimPrefix(sc.Name, "fresh-"))
	}
	b.WriteString(" ≤ leastconn everywhere |\n|---|" + strings.Repeat("---|", len(r.Scenarios)+1) + "\n")
	for i, name := range r.Names {
		label := name
		if name == ShippedName {
			label = "**" + name + "** *"
		}
		fmt.Fprintf(&b, "| %s |", label)
		for _, c := range r.Cells[i] {
			fmt.Fprintf(&b, " %.3f / %.3f (%s) |", c.P50, c.P90, pct(c.GapP50))
		}
		verdict := "–"
		switch ok, judged := r.neverAboveLeastconn(i); {
		case judged && ok:
			verdict = "yes"
		case judged:
			verdict = "no"
		}
		fmt.Fprintf(&b, " %s |\n", verdict)
	}
	r.writeHerd(&b)
	r.writeBlocks(&b)
	shedding := slices.ContainsFunc(r.Cells, func(cs []ShedCell) bool { return len(cs) > 0 && cs[0].Sheds })
	if shedding {
		b.WriteString("\n| sheds/h/server (busiest) · slowest heavy client back under 1.5× mean, s (mean / worst) |")
		for _, sc := range r.Scenarios {
			fmt.Fprintf(&b, " %s |", strings.TrimPrefix(sc.Name, "fresh-"))
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(r.Scenarios)) + "\n")
		for i, name := range r.Names {
			if len(r.Cells[i]) == 0 || !r.Cells[i][0].Sheds && name != ShippedName {
				continue
			}
			fmt.Fprintf(&b, "| %s |", name)
			for _, c := range r.Cells[i] {
				rate := "–"
				if c.Sheds {
					rate = fmt.Sprintf("%.2f (%.1f)", c.PerHour, c.MaxPerHour)
				}
				fmt.Fprintf(&b, " %s · %s / %s |", rate, secs(c.WhaleMean), secs(c.WhaleWorst))
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// BlockSeeds is the number of seeds the test of a scenario takes
// (docs/research/production-world.md): with at least twice as many, the world
// comparison also says in how many blocks of that many consecutive seeds a
// pipeline's mean is above leastconn's.
const BlockSeeds = 4

// blocksAbove counts the blocks of BlockSeeds consecutive seeds in which
// pipeline i's mean p50 and mean p90 on scenario si are above leastconn's,
// of blocks; blocks is 0 without a leastconn row or with too few seeds.
func (r *ShedResult) blocksAbove(i, si int) (p50, p90, blocks int) {
	lc := r.Cell("leastconn")
	if lc == nil {
		return 0, 0, 0
	}
	mine, theirs := r.Cells[i][si], lc[si]
	for from := 0; from+BlockSeeds <= len(mine.SeedP50); from += BlockSeeds {
		to := from + BlockSeeds
		blocks++
		if mean(mine.SeedP50[from:to]) > mean(theirs.SeedP50[from:to]) {
			p50++
		}
		if mean(mine.SeedP90[from:to]) > mean(theirs.SeedP90[from:to]) {
			p90++
		}
	}
	return p50, p90, blocks
}

// writeBlocks adds, with at least two blocks of BlockSeeds seeds, how many
// blocks put each pipeline above leastconn: how often a test of BlockSeeds
// seeds would fail it (docs/research/production-world.md).
func (r *ShedResult) writeBlocks(b *strings.Builder) {
	if r.Seeds < 2*BlockSeeds || r.Cell("leastconn") == nil {
		return
	}
	fmt.Fprintf(b, "\n| blocks of %d seeds with the mean above leastconn's, p50 / p90 (of %d) |", BlockSeeds, r.Seeds/BlockSeeds)
	for _, sc := range r.Scenarios {
		fmt.Fprintf(b, " %s |", strings.TrimPrefix(sc.Name, "fresh-"))
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(r.Scenarios)) + "\n")
	for i, name := range r.Names {
		if name == "leastconn" {
			continue
		}
		fmt.Fprintf(b, "| %s |", name)
		for si := range r.Scenarios {
			p50, p90, _ := r.blocksAbove(i, si)
			fmt.Fprintf(b, " %d / %d |", p50, p90)
		}
		b.WriteString("\n")
	}
}

// neverAboveLeastconn says whether pipeline i's p50 and p90 are at most
// leastconn's on every scenario; judged is false for leastconn itself and
// without a leastconn row.
func (r *ShedResult) neverAboveLeastconn(i int) (ok, judged bool) {
	lc := r.Cell("leastconn")
	if lc == nil || r.Names[i] == "leastconn" {
		return false, false
	}
	for si, c := range r.Cells[i] {
		if c.P50 > lc[si].P50 || c.P90 > lc[si].P90 {
			return false, true
		}
	}
	return true, true
}

// WorldPipelines are the rows --world accepts in --pipelines besides its
// arms: random(2) (Random2Arms), the anti-herding candidates
// (HerdCandidates) and the fresh-data candidates (CandidatePipelines).
func WorldPipelines() []Pipeline {
	out := append(Random2Arms(), PinArms()[len(ProductionArms()):]...)
	out = append(out, HerdCandidates()...)
	out = append(out, RefreshCandidates()...)
	out = append(out, worldShedRows("%s + shed above %g for %d at %d/min")...) // --pipelines splits on commas
	return append(out, CandidatePipelines()...)
}

// RefreshCandidates are the shipped daemon asking its source every 2, 5
// or 10 s instead of config's calibration.refresh.
func RefreshCandidates() []Pipeline {
	var out []Pipeline
	for _, r := range []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second} {
		pl := ShippedPipeline()
		pl.Name, pl.Default, pl.Refresh = fmt.Sprintf("%s refresh=%v", ShippedName, r), false, r
		out = append(out, pl)
	}
	for _, r := range []time.Duration{2 * time.Second, 15 * time.Second} {
		pl := ShippedPipeline()
		pl.Name, pl.Default, pl.Refresh, pl.SyncExternal = fmt.Sprintf("%s refresh=%v sync", ShippedName, r), false, r, true
		out = append(out, pl)
	}
	return out
}

// SelectWorldPipelines returns the WorldPipelines named in list
// (comma-separated; "all" = every one).
func SelectWorldPipelines(list string) ([]Pipeline, error) {
	all := WorldPipelines()
	if list == "all" {
		return all, nil
	}
	var out []Pipeline
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(p Pipeline) bool { return p.Name == name })
		if i < 0 {
			var names []string
			for _, p := range all {
				names = append(names, p.Name)
			}
			return nil, fmt.Errorf("unknown pipeline %q (want all or some of: %s)", name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// HerdCandidates are the anti-herding mechanisms measured side by side
// (docs/research/production-world.md).
func HerdCandidates() []Pipeline {
	var out []Pipeline
	for _, h := range []float64{0, 1, 2, 3, 4, 8, 16} { // 0: the bound off, as it shipped before
		pl := ShippedPipeline()
		pl.Name, pl.Default = fmt.Sprintf("%s max_run=%g", ShippedName, h), false
		pl.Adjust = func(p *weighter.Policy) { p.MaxRun = h }
		out = append(out, pl)
	}
	for _, h := range []float64{1, 2} {
		for _, churn := range []float64{4, 8, 16, 32} {
			pl := ShippedPipeline()
			pl.Name, pl.Default = fmt.Sprintf("%s max_run=%g run_churn=%g", ShippedName, h, churn), false
			pl.Adjust = func(p *weighter.Policy) { p.MaxRun, p.RunChurn = h, churn }
			out = append(out, pl)
		}
	}
	for _, below := range []float64{0.05, 0.1, 0.2} {
		for _, spread := range []int{3, 4} {
			pl := ShippedPipeline()
			pl.Name, pl.Default = fmt.Sprintf("%s run_rare=%g run_rare_spread=%d", ShippedName, below, spread), false
			pl.Adjust = func(p *weighter.Policy) { p.RunRare, p.RunRareSpread = below, spread }
			out = append(out, pl)
		}
	}
	pl := ShippedPipeline()
	pl.Name, pl.Default = ShippedName+" run_rare=0", false
	pl.Adjust = func(p *weighter.Policy) { p.RunRare = 0 }
	out = append(out, pl)
	return out
}

// burstHerd is, per burst event, the most of its heavy clients on one
// server at the end of the first window that ends after the burst: 1 when
// they were spread, the burst's count when all landed together.
func burstHerd(sc Scenario, tr trace, whales []arrival) []int {
	var out []int
	for _, ev := range sc.Events {
		if ev.Kind != EventBurst {
			continue
		}
		from, to := ev.At.Seconds(), (ev.At + ev.Over).Seconds()
		var mine []int // indices into whales of this burst's clients
		for k, a := range whales {
			if a.At >= from-1e-9 && a.At <= to+1e-9 && a.Rate == ev.Rate {
				mine = append(mine, k)
			}
		}
		for _, w := range tr.windows {
			if w.end < to || len(w.whales) == 0 {
				continue
			}
			on := map[int]int{}
			most := 0
			for _, k := range mine {
				if k < len(w.whales) && w.whales[k] >= 0 {
					on[w.whales[k]]++
					most = max(most, on[w.whales[k]])
				}
			}
			out = append(out, most)
			break
		}
	}
	return out
}

// writeHerd writes, for the scenarios with bursts, the most heavy clients of
// one burst that landed on one server (mean over bursts and seeds, most).
func (r *ShedResult) writeHerd(b *strings.Builder) {
	var cols []int
	for si, sc := range r.Scenarios {
		if slices.ContainsFunc(sc.Events, func(ev Event) bool { return ev.Kind == EventBurst }) {
			cols = append(cols, si)
		}
	}
	if len(cols) == 0 {
		return
	}
	b.WriteString("\n| heavy clients of one burst on one server (mean / most) |")
	for _, si := range cols {
		fmt.Fprintf(b, " %s |", r.Scenarios[si].Name)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for i, name := range r.Names {
		fmt.Fprintf(b, "| %s |", name)
		for _, si := range cols {
			c := r.Cells[i][si]
			fmt.Fprintf(b, " %.2f / %.0f |", c.Herd, c.HerdWorst)
		}
		b.WriteString("\n")
	}
}

// WorldShedGoalScenarios are the production scenarios the shedding goal is
// judged on: long-lived, burst and drift.
func WorldShedGoalScenarios() []Scenario {
	return []Scenario{LongLivedScenario(), BurstScenario(), DriftScenario()}
}

// WorldShedGrid is the grid of shed factors swept on the production world:
// above 1.2-2, for 1-2 cycles, 4 or 8 per minute, with weighter.DefaultShed's
// max_share, min_age, cooldown and progress.
func WorldShedGrid() []weighter.ShedPolicy {
	var out []weighter.ShedPolicy
	for _, above := range []float64{1.2, 1.3, 1.5, 1.75, 2} {
		for _, n := range []int{1, 2} {
			for _, pm := range []int{4, 8} {
				p := weighter.DefaultShed()
				p.Above, p.For, p.MaxPerMinute = above, n, pm
				out = append(out, p)
			}
		}
	}
	return out
}

// WorldShedSweep is what --world --shed-sweep compares: the arms without
// shedding and the shipped daemon with each point of WorldShedGrid.
func WorldShedSweep() []Pipeline {
	arms := ProductionArms()
	out := slices.DeleteFunc(arms, func(p Pipeline) bool { return p.Shed != nil })
	return append(out, worldShedRows("shed above %[2]g, for %[3]d, %[4]d/min")...)
}

// worldShedRows is the shipped daemon with each point of WorldShedGrid,
// named by format over ShippedName, above, for and per minute.
func worldShedRows(format string) []Pipeline {
	var out []Pipeline
	for _, p := range WorldShedGrid() {
		out = append(out, ShippedShedPipeline(fmt.Sprintf(format, ShippedName, p.Above, p.For, p.MaxPerMinute), p))
	}
	return out
}

// mean is the arithmetic mean of xs (NaN when empty).
func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

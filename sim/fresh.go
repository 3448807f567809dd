package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// External metric pipelines as users have them (resolution, rate window, delay).
type External struct {
	Name       string
	Resolution time.Duration
	RateWindow time.Duration
	Delay      time.Duration
}

// Externals are the external metrics the fresh-data comparison is run with:
// Prometheus scraping every 15 s with rate over 30 s (the first) or 1 m (the
// README's quick start), and Graphite at 10 s resolution, 20 s behind.
func Externals() []External {
	return []External{
		{Name: "prometheus-15s-30s", Resolution: 15 * time.Second, RateWindow: 30 * time.Second},
		{Name: "prometheus-15s-1m", Resolution: 15 * time.Second, RateWindow: time.Minute},
		{Name: "graphite-10s-delay-20s", Resolution: 10 * time.Second, RateWindow: 10 * time.Second, Delay: 20 * time.Second},
		{Name: "graphite-10s-delay-30s", Resolution: 10 * time.Second, RateWindow: 10 * time.Second, Delay: 30 * time.Second},
		{Name: "graphite-60s-delay-60s", Resolution: time.Minute, RateWindow: time.Minute, Delay: time.Minute},
	}
}

// ExternalNamed returns the external metric of that name.
func ExternalNamed(name string) (External, error) {
	var names []string
	for _, e := range Externals() {
		if e.Name == name {
			return e, nil
		}
		names = append(names, e.Name)
	}
	return External{}, fmt.Errorf("unknown external %q (want one of %s)", name, strings.Join(names, ", "))
}

// Apply sets the scenario's monitoring pipeline to the external metric.
func (e External) Apply(sc *Scenario) {
	sc.Resolution, sc.RateWindow, sc.Delay = e.Resolution, e.RateWindow, e.Delay
}

// FreshScenarios are the scenarios the fresh-by-default pipeline is chosen on
// (files in examples/scenarios/fresh/): heterogeneous servers (s3 and s6 cost
// 1.5× per datapoint), background load (s4 carries +30 % of the mean outside
// HAProxy), three balancers with 50/30/20 % of the clients, and the three goal
// scenarios; all with the default events, Prometheus every 15 s with rate over
// 30 s as the external metric, and a 2 s daemon interval.
func FreshScenarios() []Scenario {
	prep := func(sc Scenario, name string) Scenario {
		sc.Name = name
		sc.Interval = 2 * time.Second
		Externals()[0].Apply(&sc)
		return sc
	}
	het := prep(DefaultScenario(), "fresh-heterogeneous")
	het.Costs = map[string]float64{"s3": 1.5, "s6": 1.5}
	bg := prep(DefaultScenario(), "fresh-background")
	bg.Background = map[string]float64{"s4": 0.3}
	three := prep(DefaultScenario(), "fresh-three-balancers")
	three.Balancers = []float64{0.5, 0.3, 0.2}
	out := []Scenario{het, bg, three}
	for _, g := range GoalScenarios() {
		out = append(out, prep(g, "fresh-"+g.Name))
	}
	return out
}

// FreshCell is one pipeline's seed-mean figures on one scenario.
type FreshCell struct {
	P50, P90, GapP50, GapP90, WritesPerCycle float64
}

// FreshResult is a fresh-data comparison: per scenario, per pipeline.
type FreshResult struct {
	Scenarios []Scenario
	Names     []string
	Default   []bool
	Cells     [][]FreshCell // [pipeline][scenario]
	Seeds     int
}

// CompareFresh runs the pipelines on every scenario with each seed (RunFleet)
// and averages p50, p90 and writes per cycle over the seeds; gaps are of the means.
func CompareFresh(scenarios []Scenario, seeds []uint64, pipelines []Pipeline) (*FreshResult, error) {
	res := &FreshResult{Scenarios: scenarios, Seeds: len(seeds)}
	for si, sc := range scenarios {
		var acc []Figures
		for _, seed := range seeds {
			sc.Seed = seed
			rep, err := RunFleet(sc, pipelines)
			if err != nil {
				return nil, fmt.Errorf("%s seed %d: %w", sc.Name, seed, err)
			}
			acc = addFigures(acc, rep.Strategies, 1/float64(len(seeds)))
			if si == 0 && res.Names == nil {
				for _, f := range rep.Strategies {
					res.Names = append(res.Names, f.Strategy)
					res.Default = append(res.Default, f.Default)
				}
				res.Cells = make([][]FreshCell, len(rep.Strategies))
			}
		}
		var lc, or Figures
		for _, f := range acc {
			switch f.Strategy {
			case "leastconn":
				lc = f
			case "oracle":
				or = f
			}
		}
		for i, f := range acc {
			res.Cells[i] = append(res.Cells[i], FreshCell{
				P50: f.P50, P90: f.P90, WritesPerCycle: f.WritesPerCycle,
				GapP50: gapClosed(lc.P50, or.P50, f.P50), GapP90: gapClosed(lc.P90, or.P90, f.P90),
			})
		}
	}
	return res, nil
}

// Cell returns the named pipeline's cells (nil when absent).
func (r *FreshResult) Cell(name string) []FreshCell {
	for i, n := range r.Names {
		if n == name {
			return r.Cells[i]
		}
	}
	return nil
}

// WriteMarkdown writes one row per pipeline: per scenario p50 / p90 (gap p50),
// writes per cycle, and whether it beats agent-check on p50 and p90 everywhere.
func (r *FreshResult) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| pipeline |")
	for _, sc := range r.Scenarios {
		fmt.Fprintf(&b, " %s |", strings.TrimPrefix(sc.Name, "fresh-"))
	}
	b.WriteString(" writes/cycle | beats agent everywhere |\n|---|")
	b.WriteString(strings.Repeat("---|", len(r.Scenarios)+2) + "\n")
	agent := r.Cell("agent-check")
	for i, name := range r.Names {
		label := name
		if r.Default[i] {
			label = "**" + name + "**"
		}
		fmt.Fprintf(&b, "| %s |", label)
		all, wpc := agent != nil, 0.0
		for si, c := range r.Cells[i] {
			fmt.Fprintf(&b, " %.3f / %.3f (%s) |", c.P50, c.P90, pct(c.GapP50))
			wpc += c.WritesPerCycle / float64(len(r.Cells[i]))
			if agent != nil && !(c.P50 < agent[si].P50 && c.P90 < agent[si].P90) {
				all = false
			}
		}
		yes := "no"
		if all && name != "agent-check" {
			yes = "yes"
		}
		if name == "agent-check" || name == "leastconn" || name == "oracle" {
			yes = "–"
		}
		fmt.Fprintf(&b, " %.2f | %s |\n", wpc, yes)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// meanGap is the mean of a pipeline's p50 gaps (for sorting and summaries).
func meanGap(cells []FreshCell) float64 {
	s := 0.0
	for _, c := range cells {
		s += c.GapP50 / float64(len(cells))
	}
	if len(cells) == 0 {
		return math.NaN()
	}
	return s
}

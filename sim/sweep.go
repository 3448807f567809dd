package sim

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Grid is the set of policies a sweep tries: every combination of the listed
// values over weighter.DefaultPolicy(). Gains apply to feedback only, limiting
// factors and aggressiveness to the stateless functions only.
type Grid struct {
	Functions       []string
	LimitingFactors []float64
	Aggressiveness  []float64
	Gains           []float64
	Deadbands       []int
	MaxSteps        []float64
	// PerConn lists the load inputs tried: false = load, true = load per open connection.
	PerConn []bool
	// ConnectionLives lists the connection_life values tried (0 = off) with the
	// stateless functions fed load; the estimate is per connection already, so
	// it is not combined with per-connection input or with feedback.
	ConnectionLives []time.Duration
}

// DefaultGrid is the sweep `haproxy-weighter-sim --sweep` runs, recorded in
// docs/research/simulator-sweep.md.
func DefaultGrid() Grid {
	return Grid{
		Functions:       weighter.FunctionNames(),
		LimitingFactors: []float64{2, 4, 8},
		Aggressiveness:  []float64{0.5, 1, 2},
		Gains:           []float64{0.1, 0.25, 0.5, 0.75, 1},
		Deadbands:       []int{0, 2, 8},
		MaxSteps:        []float64{0, 1.5, 2, 4},
		PerConn:         []bool{false, true},
		ConnectionLives: []time.Duration{0, 30 * time.Second, 60 * time.Second},
	}
}

// Policies expands the grid, without duplicates.
func (g Grid) Policies() []weighter.Policy {
	var out []weighter.Policy
	seen := map[weighter.Policy]bool{}
	def := weighter.DefaultPolicy()
	for _, fn := range g.Functions {
		for _, a := range g.factorPairs(fn, def) {
			for _, db := range g.Deadbands {
				for _, ms := range g.MaxSteps {
					for _, life := range g.lives() {
						p := def
						p.Function, p.Deadband, p.MaxStep, p.ConnectionLife = fn, db, ms, duration.Duration(life)
						p.LimitingFactor, p.Aggressiveness, p.Gain = a[0], a[1], a[2]
						if life > 0 && fn == "feedback" {
							continue
						}
						if !seen[p] && p.Validate() == nil {
							seen[p] = true
							out = append(out, p)
						}
					}
				}
			}
		}
	}
	return out
}

// lives is ConnectionLives, or the default's alone when the grid lists none.
func (g Grid) lives() []time.Duration {
	if len(g.ConnectionLives) == 0 {
		return []time.Duration{time.Duration(weighter.DefaultPolicy().ConnectionLife)}
	}
	return g.ConnectionLives
}

// factorPairs lists (limiting factor, aggressiveness, gain) triples that matter for fn.
func (g Grid) factorPairs(fn string, def weighter.Policy) [][3]float64 {
	var out [][3]float64
	if fn == "feedback" {
		for _, gain := range g.Gains {
			out = append(out, [3]float64{def.LimitingFactor, def.Aggressiveness, gain})
		}
		return out
	}
	for _, lf := range g.LimitingFactors {
		if fn != "limited-proportions" && lf != g.LimitingFactors[0] {
			continue // normalised-exponential has no limiting factor
		}
		for _, a := range g.Aggressiveness {
			if fn != "limited-proportions" {
				lf = def.LimitingFactor
			}
			out = append(out, [3]float64{lf, a, def.Gain})
		}
	}
	return out
}

// SweepCell is one policy's mean figures on one scenario over the seeds.
type SweepCell struct {
	P50, P90, GapP50, GapP90, WritesPerCycle float64
	BeatsAgent                               bool // better than agent-check on p50 and p90
}

// Strategies expands the grid into weighter strategies under leastconn.
func (g Grid) Strategies() []Strategy {
	var out []Strategy
	for _, perConn := range g.PerConn {
		for _, p := range g.Policies() {
			if perConn && p.ConnectionLife > 0 {
				continue // would divide by the connections twice
			}
			out = append(out, weighterStrategy(p, perConn))
		}
	}
	return out
}

// SweepRow is one policy across the sweep's scenarios.
type SweepRow struct {
	Strategy Strategy
	Cells    []SweepCell
	MinGap   float64 // smallest p50 gap closed over the scenarios
	All      bool    // beats agent-check on every scenario
}

// SweepResult holds the baselines' and every policy's figures per scenario.
type SweepResult struct {
	Scenarios []Scenario
	Baselines map[string][]SweepCell // leastconn, agent-check, oracle
	Rows      []SweepRow             // best first
}

// Sweep runs every policy of the grid on every scenario with each seed and ranks
// the policies: those beating agent-check everywhere first, then by the smallest
// share of the leastconn→oracle p50 gap closed over the scenarios.
func Sweep(scenarios []Scenario, seeds []uint64, grid Grid) (*SweepResult, error) {
	policies := grid.Strategies()
	strategies := append(Baselines(), policies...)
	res := &SweepResult{Scenarios: scenarios, Baselines: map[string][]SweepCell{}}
	sums := make([][]Figures, len(scenarios)) // per scenario, per strategy: seed means
	for si, sc := range scenarios {
		for _, seed := range seeds {
			sc.Seed = seed
			rep, err := Run(sc, strategies)
			if err != nil {
				return nil, err
			}
			sums[si] = addFigures(sums[si], rep.Strategies, 1/float64(len(seeds)))
		}
	}
	for si := range scenarios {
		cells := cellsOf(sums[si])
		for _, name := range []string{"leastconn", "agent-check", "oracle"} {
			res.Baselines[name] = append(res.Baselines[name], cells[slices.IndexFunc(strategies, func(s Strategy) bool { return s.Name == name })])
		}
		for pi := range policies {
			if si == 0 {
				res.Rows = append(res.Rows, SweepRow{Strategy: policies[pi], MinGap: math.Inf(1), All: true})
			}
			c := cells[len(Baselines())+pi]
			row := &res.Rows[pi]
			row.Cells = append(row.Cells, c)
			row.MinGap = math.Min(row.MinGap, c.GapP50)
			row.All = row.All && c.BeatsAgent
		}
	}
	slices.SortStableFunc(res.Rows, func(a, b SweepRow) int {
		if a.All != b.All {
			if a.All {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.MinGap, a.MinGap)
	})
	return res, nil
}

// addFigures accumulates w × each strategy's p50, p90 and writes per cycle.
func addFigures(acc, figs []Figures, w float64) []Figures {
	if acc == nil {
		acc = make([]Figures, len(figs))
	}
	for i, f := range figs {
		acc[i].Strategy = f.Strategy
		acc[i].P50 += w * f.P50
		acc[i].P90 += w * f.P90
		acc[i].WritesPerCycle += w * f.WritesPerCycle
	}
	return acc
}

// cellsOf turns seed-mean figures (baselines first, in Baselines order) into cells.
func cellsOf(figs []Figures) []SweepCell {
	lc, ag, or := figs[0], figs[2], figs[3]
	out := make([]SweepCell, len(figs))
	for i, f := range figs {
		out[i] = SweepCell{
			P50: f.P50, P90: f.P90, WritesPerCycle: f.WritesPerCycle,
			GapP50:     gapClosed(lc.P50, or.P50, f.P50),
			GapP90:     gapClosed(lc.P90, or.P90, f.P90),
			BeatsAgent: f.P50 < ag.P50 && f.P90 < ag.P90,
		}
	}
	return out
}

// shown is the top rows, then the best row of every function and load input and
// the current default's row where they are not among the top.
func (r *SweepResult) shown(top int) []SweepRow {
	var out []SweepRow
	seen := map[string]bool{}
	for i, row := range r.Rows {
		group := fmt.Sprintf("%s/%v", row.Strategy.Policy.Function, row.Strategy.PerConn)
		if i < top || !seen[group] || row.Strategy.Default {
			out = append(out, row)
		}
		seen[group] = true
	}
	return out
}

// WriteMarkdown writes the baselines, the top rows, the best row of every function
// and load input, and the current default as a Markdown table, best first.
func (r *SweepResult) WriteMarkdown(w io.Writer, top int) error {
	var b strings.Builder
	b.WriteString("| policy |")
	for _, sc := range r.Scenarios {
		fmt.Fprintf(&b, " %s p50 / p90 (gap p50) |", sc.Name)
	}
	b.WriteString(" writes/cycle | beats agent everywhere |\n|---|")
	b.WriteString(strings.Repeat("---|", len(r.Scenarios)+2) + "\n")
	for _, name := range []string{"leastconn", "agent-check", "oracle"} {
		writeRow(&b, name, r.Baselines[name], name == "agent-check")
	}
	for _, row := range r.shown(top) {
		label := row.Strategy.Name
		if row.Strategy.Default {
			label = "**" + label + "** (current default)"
		}
		writeRow(&b, label, row.Cells, row.All)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeRow(b *strings.Builder, label string, cells []SweepCell, all bool) {
	fmt.Fprintf(b, "| %s |", label)
	wpc := 0.0
	for _, c := range cells {
		fmt.Fprintf(b, " %.3f / %.3f (%s) |", c.P50, c.P90, pct(c.GapP50))
		wpc += c.WritesPerCycle / float64(len(cells))
	}
	yes := "no"
	if all {
		yes = "yes"
	}
	fmt.Fprintf(b, " %.2f | %s |\n", wpc, yes)
}

func pct(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

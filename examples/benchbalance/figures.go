package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
	"github.com/haproxy-weighter/haproxy-weighter/sim"
)

// armKind is how an arm's HAProxy places connections.
type armKind int

const (
	kindControl  armKind = iota // leastconn, never weighted
	kindWeighted                // leastconn, weighted by haproxy-weighter
	kindOracle                  // each connection placed by the oracle
)

// armSpec is one arm: an HAProxy with its own sinks, fed the same clients as the others.
type armSpec struct {
	Name string // its files' names and its column
	Kind armKind
	// Shed: the weighter runs the README's minimal config with its commented shed line
	// on, instead of the quick start's flags.
	Shed bool
	// Pin: the arm's HAProxy backend has the stick table and `stick match src`
	// (pinTableLines), and its weighter is given that HAProxy's configuration file
	// (--haproxy-config), where it finds the listeners whose clients it measures: the
	// daemon pins heavy clients by default when it has both.
	Pin bool
}

// The lab scenario's three arms, at fixed indices (its table is written by index).
const (
	armControl = iota
	armWeighted
	armOracle
)

var labArms = []armSpec{
	{Name: "control", Kind: kindControl},
	{Name: "weighted", Kind: kindWeighted},
	{Name: "oracle", Kind: kindOracle},
}

// snapshot is every sink's datapoint counter at one moment, per arm.
type snapshot struct {
	T     time.Duration // since the traffic started
	Lines [][]int64
	Open  [][]int // each sink's open connections, per arm (nil in tests that need none)
}

// windowRatios returns max/mean of one arm's servers' loads (datapoints/s) over
// consecutive windows of length window, the first starting at from, the last ending by
// to. A window's bounds are the first snapshots at or after them.
func windowRatios(snaps []snapshot, arm int, from, to, window time.Duration) []float64 {
	at := func(t time.Duration) int {
		i, _ := slices.BinarySearchFunc(snaps, t, func(s snapshot, t time.Duration) int {
			return int(s.T - t)
		})
		return i
	}
	var out []float64
	for start := from; start+window <= to; start += window {
		i, j := at(start), at(start+window)
		if j >= len(snaps) || i >= j {
			break
		}
		dt := (snaps[j].T - snaps[i].T).Seconds()
		loads := make([]float64, len(snaps[i].Lines[arm]))
		for k := range loads {
			loads[k] = float64(snaps[j].Lines[arm][k]-snaps[i].Lines[arm][k]) / dt
		}
		out = append(out, loadlab.MaxOverMean(loads))
	}
	return out
}

// gapClosed is the share of the control → oracle gap that x closes (NaN without a gap).
func gapClosed(control, oracle, x float64) float64 {
	if !(control-oracle > 0) || math.IsNaN(x) {
		return math.NaN()
	}
	return (control - x) / (control - oracle)
}

// figures are one seed's (or the mean's) p50 and p90 of max/mean, per arm.
type figures struct {
	Label    string
	P50, P90 []float64
	Windows  int // windows per arm
}

func figuresOf(label string, nArms int, snaps []snapshot, from, to, window time.Duration) figures {
	f := figures{Label: label, P50: make([]float64, nArms), P90: make([]float64, nArms)}
	for a := range nArms {
		r := windowRatios(snaps, a, from, to, window)
		f.P50[a], f.P90[a], f.Windows = sim.Quantile(r, 0.5), sim.Quantile(r, 0.9), len(r)
	}
	return f
}

// meanOf averages the seeds' figures arm by arm; the gap of the mean is computed from
// these means.
func meanOf(fs []figures) figures {
	n := len(fs[0].P50)
	m := figures{Label: "mean", P50: make([]float64, n), P90: make([]float64, n)}
	for a := range n {
		for _, f := range fs {
			m.P50[a] += f.P50[a] / float64(len(fs))
			m.P90[a] += f.P90[a] / float64(len(fs))
		}
	}
	return m
}

func writeTableHeader(w io.Writer) {
	fmt.Fprintf(w, "%-6s %-19s %-19s %-19s %s\n", "seed", "control p50 / p90", "weighted p50 / p90", "oracle p50 / p90", "gap closed p50 / p90")
}

func writeRow(w io.Writer, f figures) {
	pair := func(a int) string { return fmt.Sprintf("%s / %s", ratio(f.P50[a]), ratio(f.P90[a])) }
	g50 := gapClosed(f.P50[armControl], f.P50[armOracle], f.P50[armWeighted])
	g90 := gapClosed(f.P90[armControl], f.P90[armOracle], f.P90[armWeighted])
	fmt.Fprintf(w, "%-6s %-19s %-19s %-19s %s / %s\n", f.Label, pair(armControl), pair(armWeighted), pair(armOracle), percent(g50), percent(g90))
}

func ratio(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

func percent(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

// writeWindows writes the trace behind the figures, one row per window of length window
// from the start of the traffic, arm and server: the server's load (datapoints/s) over the
// window and its open connections at the window's end. Read beside the weighter's debug log
// and drifts.tsv, it says which server carried what when a seed went wrong.
func writeWindows(w io.Writer, arms []string, snaps []snapshot, window time.Duration) error {
	if _, err := fmt.Fprintln(w, "end_s\tarm\tserver\tload\topen"); err != nil {
		return err
	}
	for end := window; ; end += window {
		i := slices.IndexFunc(snaps, func(s snapshot) bool { return s.T >= end-window })
		j := slices.IndexFunc(snaps, func(s snapshot) bool { return s.T >= end })
		if i < 0 || j < 0 || i >= j {
			return nil
		}
		dt := (snaps[j].T - snaps[i].T).Seconds()
		for a, name := range arms {
			for k := range snaps[j].Lines[a] {
				open := -1
				if snaps[j].Open != nil {
					open = snaps[j].Open[a][k]
				}
				load := float64(snaps[j].Lines[a][k]-snaps[i].Lines[a][k]) / dt
				if _, err := fmt.Fprintf(w, "%.0f\t%s\ts%d\t%.1f\t%d\n", end.Seconds(), name, k+1, load, open); err != nil {
					return err
				}
			}
		}
	}
}

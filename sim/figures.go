package sim

import (
	"math"
	"slices"
)

// recoverBelow is the max/mean an event must bring the backend back under.
const recoverBelow = 1.25

// joinHorizon is how long after a server joins its connection share is watched.
const joinHorizon = 300.0

// Figures are one strategy's scores over the scenario (after warmup).
type Figures struct {
	Strategy string  `json:"strategy"`
	Default  bool    `json:"default"`
	P50      float64 `json:"p50_max_mean"`
	P90      float64 `json:"p90_max_mean"`
	MedianCV float64 `json:"median_cv"`
	// GapClosed is the share of the leastconn→oracle gap closed on p50 and p90 max/mean.
	GapClosedP50 float64    `json:"gap_closed_p50"`
	GapClosedP90 float64    `json:"gap_closed_p90"`
	Recovery     []Recovery `json:"recovery"`
	// NewServerPeakShare is the largest share of new connections an added server
	// took in one window during its first 5 minutes (nil without an add event).
	NewServerPeakShare *float64 `json:"new_server_peak_share,omitempty"`
	WritesPerCycle     float64  `json:"writes_per_cycle"`
	Writes             int      `json:"writes"`
	Cycles             int      `json:"cycles"`
	Fallbacks          int      `json:"fallbacks"`
	// Shed is the shedding's figures (pipelines that shed only).
	Shed *ShedFigures `json:"shed,omitempty"`
}

// Recovery is the time from an event until max/mean was back under 1.25.
type Recovery struct {
	Event   string   `json:"event"`
	At      float64  `json:"at_seconds"`
	Seconds *float64 `json:"seconds"` // nil: not before the next event or the end
}

// ratio is max/mean and coefficient of variation of one window's loads.
func ratio(loads []float64) (maxMean, cv float64) {
	var vals []float64
	for _, x := range loads {
		if !math.IsNaN(x) {
			vals = append(vals, x)
		}
	}
	if len(vals) == 0 {
		return math.NaN(), math.NaN()
	}
	m := 0.0
	for _, x := range vals {
		m += x
	}
	m /= float64(len(vals))
	if m == 0 {
		return 1, 0
	}
	v := 0.0
	for _, x := range vals {
		v += (x - m) * (x - m)
	}
	return slices.Max(vals) / m, math.Sqrt(v/float64(len(vals))) / m
}

// score computes a pipeline's figures from its trace.
func score(sc Scenario, pl Pipeline, tr trace, fallbacks int) Figures {
	f := Figures{Strategy: pl.Name, Default: pl.Default, Writes: tr.writes, Cycles: tr.cycles, Fallbacks: fallbacks}
	var mm, cvs []float64
	for _, w := range tr.windows {
		if w.end-sc.Window.Seconds() < sc.Warmup.Seconds() {
			continue
		}
		r, cv := ratio(w.loads)
		mm, cvs = append(mm, r), append(cvs, cv)
	}
	f.P50, f.P90, f.MedianCV = Quantile(mm, 0.5), Quantile(mm, 0.9), Quantile(cvs, 0.5)
	if tr.cycles > 0 {
		f.WritesPerCycle = float64(tr.writes) / float64(tr.cycles)
	}
	f.Recovery = recoveries(sc, tr)
	f.NewServerPeakShare = peakShare(sc, tr)
	return f
}

// recoveries measures, per event, the time until the first whole window after it
// whose max/mean is under recoverBelow, searching until the next event.
func recoveries(sc Scenario, tr trace) []Recovery {
	events := slices.Clone(sc.Events)
	slices.SortStableFunc(events, func(a, b Event) int { return cmpFloat(a.At.Seconds(), b.At.Seconds()) })
	var out []Recovery
	for i, ev := range events {
		at, until := ev.At.Seconds(), sc.Duration.Seconds()
		if i+1 < len(events) {
			until = events[i+1].At.Seconds()
		}
		rec := Recovery{Event: ev.Kind, At: at}
		for _, w := range tr.windows {
			if w.end-sc.Window.Seconds() < at || w.end > until {
				continue
			}
			if r, _ := ratio(w.loads); r < recoverBelow {
				d := w.end - at
				rec.Seconds = &d
				break
			}
		}
		out = append(out, rec)
	}
	return out
}

// peakShare is the largest share of a window's new connections that the first added
// server took during its first joinHorizon seconds.
func peakShare(sc Scenario, tr trace) *float64 {
	at := math.Inf(1)
	for _, ev := range sc.Events {
		if ev.Kind == EventAdd {
			at = math.Min(at, ev.At.Seconds())
		}
	}
	if math.IsInf(at, 1) {
		return nil
	}
	idx := sc.Servers // the first server added gets the next index
	peak := 0.0
	for _, w := range tr.windows {
		if w.end <= at || w.end-at > joinHorizon+sc.Window.Seconds() || idx >= len(w.picked) {
			continue
		}
		total := 0
		for _, p := range w.picked {
			total += p
		}
		if total > 0 {
			peak = math.Max(peak, float64(w.picked[idx])/float64(total))
		}
	}
	return &peak
}

// Quantile is the q-quantile of xs by linear interpolation between the two
// nearest ranks, NaNs left out (NaN when none is left): how the simulator
// and the real-HAProxy balance benchmark take their p50 and p90.
func Quantile(xs []float64, q float64) float64 {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	pos := q * float64(len(v)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(v)-1)
	return v[lo] + (v[hi]-v[lo])*(pos-float64(lo))
}

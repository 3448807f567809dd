package sim

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
)

// Report is the comparison of several strategies over one scenario.
type Report struct {
	Scenario   Scenario  `json:"scenario"`
	Strategies []Figures `json:"strategies"`
	traces     []trace
	names      []string
	whales     []arrival // the whales, in arrival order
	// shippedInterval is the shipped row's interval (RunDefault), 0 without one.
	shippedInterval time.Duration
}

// Run simulates every strategy over the scenario, each on the same connection
// stream, in parallel, and scores them. The leastconn and oracle baselines are
// needed for the gap figures and are added when missing.
func Run(sc Scenario, strategies []Strategy) (*Report, error) {
	return simulate(sc, pipelinesOf(withGapBaselines(strategies)))
}

func pipelinesOf(strategies []Strategy) []Pipeline {
	out := make([]Pipeline, len(strategies))
	for i, st := range strategies {
		out[i] = st.pipeline()
	}
	return out
}

// simulate runs every pipeline over the scenario on the same connection
// stream (common random numbers: the figures differ by placement alone), in
// parallel, and scores each.
func simulate(sc Scenario, pipelines []Pipeline) (*Report, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	str := newStream(sc)
	own := owners(sc, str)
	rep := &Report{Scenario: sc, Strategies: make([]Figures, len(pipelines)), traces: make([]trace, len(pipelines))}
	rep.whales = whaleArrivals(str)
	errs := make([]error, len(pipelines))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, pl := range pipelines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			m, err := newModel(sc, pl, str, own)
			if err == nil {
				rep.traces[i], err = m.run()
			}
			if err != nil {
				errs[i] = fmt.Errorf("pipeline %s: %w", pl.Name, err)
				return
			}
			rep.Strategies[i] = score(sc, pl, rep.traces[i], m.fallbacks())
			rep.Strategies[i].Shed = m.shedFigures()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, err
		}
		rep.names = append(rep.names, pipelines[i].Name)
	}
	rep.fillGaps()
	return rep, nil
}

func withGapBaselines(strategies []Strategy) []Strategy {
	have := map[string]bool{}
	for _, st := range strategies {
		have[st.Kind] = true
	}
	out := append([]Strategy(nil), strategies...)
	for _, b := range Baselines() {
		if (b.Kind == KindLeastconn || b.Kind == KindOracle) && !have[b.Kind] {
			out = append(out, b)
		}
	}
	return out
}

// fillGaps sets each strategy's share of the leastconn→oracle gap it closes.
func (r *Report) fillGaps() {
	var lc, or Figures
	for _, f := range r.Strategies {
		switch f.Strategy {
		case "leastconn":
			lc = f
		case "oracle":
			or = f
		}
	}
	for i := range r.Strategies {
		f := &r.Strategies[i]
		f.GapClosedP50 = gapClosed(lc.P50, or.P50, f.P50)
		f.GapClosedP90 = gapClosed(lc.P90, or.P90, f.P90)
	}
}

func gapClosed(leastconn, oracle, x float64) float64 {
	if leastconn-oracle <= 0 || math.IsNaN(x) {
		return math.NaN()
	}
	return (leastconn - x) / (leastconn - oracle)
}

// Default returns the figures of the row marked default (nil when none is).
func (r *Report) Default() *Figures {
	for i := range r.Strategies {
		if r.Strategies[i].Default {
			return &r.Strategies[i]
		}
	}
	return nil
}

// Get returns the figures of the named strategy (nil when absent).
func (r *Report) Get(name string) *Figures {
	for i := range r.Strategies {
		if r.Strategies[i].Strategy == name {
			return &r.Strategies[i]
		}
	}
	return nil
}

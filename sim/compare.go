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
	whales     []arrival // fresh-data model: the whales, in arrival order
	// shippedInterval is the shipped row's interval (RunDefault), 0 without one.
	shippedInterval time.Duration
}

// Run simulates every strategy over the scenario, each on the same connection
// stream, in parallel, and scores them. The leastconn and oracle baselines are
// needed for the gap figures and are added when missing.
func Run(sc Scenario, strategies []Strategy) (*Report, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	strategies = withGapBaselines(strategies)
	str := newStream(sc)
	rep := &Report{Scenario: sc, Strategies: make([]Figures, len(strategies)), traces: make([]trace, len(strategies))}
	errs := make([]error, len(strategies))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, st := range strategies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			rep.Strategies[i], rep.traces[i], errs[i] = runOne(sc, st, str)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, err
		}
		rep.names = append(rep.names, strategies[i].Name)
	}
	rep.fillGaps()
	return rep, nil
}

func runOne(sc Scenario, st Strategy, str *stream) (Figures, trace, error) {
	r, err := newRunner(sc, st, str)
	if err != nil {
		return Figures{}, trace{}, err
	}
	tr, err := r.run()
	if err != nil {
		return Figures{}, trace{}, fmt.Errorf("strategy %s: %w", st.Name, err)
	}
	return score(sc, st, tr, r.b.fallbacks), tr, nil
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

package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"gopkg.in/yaml.v3"
)

// WriteTable writes the comparison as an aligned text table; the default policy's
// row is marked with '*'.
func (r *Report) WriteTable(w io.Writer) error {
	sc := r.Scenario
	fmt.Fprintf(w, "scenario %q: %d servers, ~%d connections, %v, mean life %v,\n",
		sc.Name, sc.Servers, sc.Connections, sc.Rate, sc.MeanLife)
	fmt.Fprintf(w, "%v simulated (warmup %v), resolution %v, rate window %v, interval %v, seed %d; max/mean over %v windows\n\n",
		sc.Duration, sc.Warmup, sc.Resolution, sc.RateWindow, sc.Interval, sc.Seed, sc.Window)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"strategy", "p50", "p90", "med CV", "gap p50", "gap p90"}
	for _, rec := range r.Strategies[0].Recovery {
		head = append(head, "rec "+rec.Event)
	}
	head = append(head, "new srv peak", "writes/cycle")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, f := range r.Strategies {
		name := f.Strategy
		if f.Default {
			name = "* " + name
		}
		cols := []string{name, num(f.P50), num(f.P90), num(f.MedianCV), pct(f.GapClosedP50), pct(f.GapClosedP90)}
		for _, rec := range f.Recovery {
			cols = append(cols, seconds(rec.Seconds))
		}
		share := "–"
		if f.NewServerPeakShare != nil {
			share = pct(*f.NewServerPeakShare)
		}
		cols = append(cols, share, fmt.Sprintf("%.2f", f.WritesPerCycle))
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\np50/p90: max/mean load; gap: share of the leastconn→oracle gap closed; rec: seconds until max/mean < %.2f\n"+
		"after each event (never = not before the next event); new srv peak: largest share of new connections the added\n"+
		"server took in one window (fair share 1/%d); writes/cycle: weights changed per weighter cycle (agent-check: per\n"+
		"report round); per-conn: the weighter is fed load per open connection\n", recoverBelow, sc.Servers+1)
	if err != nil {
		return err
	}
	if r.shippedInterval > 0 {
		if _, err := fmt.Fprintln(w, shippedNote(sc, r.shippedInterval)); err != nil {
			return err
		}
	}
	return r.writeShedTable(w)
}

// writeShedTable writes the shedding pipelines' costs, when there are any.
func (r *Report) writeShedTable(w io.Writer) error {
	var rows []Figures
	for _, f := range r.Strategies {
		if f.Shed != nil {
			rows = append(rows, f)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "shedding\tsheds\tper hour per server\tmost on one server\tbytes in flight mean\tmax\twhales back under 1.5× mean")
	for _, f := range rows {
		s := f.Shed
		var rec []string
		for _, x := range s.WhaleRecovery {
			rec = append(rec, seconds(x))
		}
		whales := strings.Join(rec, " ")
		if whales == "" {
			whales = "–"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.1f\t%.0f B\t%.0f B\t%s\n", f.Strategy, s.Sheds, s.PerHourPerServer,
			s.MaxPerHourOneServer, s.BytesInFlightMean, s.BytesInFlightMax, whales)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nsheds after the warmup; bytes in flight: min(64 KiB, rate × %d B × %gs) per shed connection; whales: seconds\n"+
		"from each whale's arrival until its server was under 1.5× the mean in a %v window (never = not while it lived)\n", bytesPerLine, inFlightSpan, r.Scenario.Window)
	return err
}

// WriteJSON writes the report as indented JSON (NaN figures become null).
func (r *Report) WriteJSON(w io.Writer) error {
	out, err := r.jsonReport()
	if err != nil {
		return err
	}
	return writeIndented(w, out)
}

// jsonReport is a report in JSON: the scenario, every row's figures, and,
// in the run without flags only, the world comparison (WriteJSONWithWorld).
type jsonReport struct {
	Scenario   map[string]any `json:"scenario"`
	Strategies []jsonFigures  `json:"strategies"`
	World      *jsonWorld     `json:"world,omitempty"`
}

func (r *Report) jsonReport() (jsonReport, error) {
	sc, err := scenarioMap(r.Scenario)
	if err != nil {
		return jsonReport{}, err
	}
	out := jsonReport{Scenario: sc}
	for _, f := range r.Strategies {
		out.Strategies = append(out.Strategies, jsonFigures{f, nullable(f.GapClosedP50), nullable(f.GapClosedP90)})
	}
	return out, nil
}

// scenarioMap is the scenario as its YAML keys and values, so durations read "30s".
func scenarioMap(sc Scenario) (map[string]any, error) {
	data, err := yaml.Marshal(sc)
	if err != nil {
		return nil, fmt.Errorf("encode scenario: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("encode scenario: %w", err)
	}
	return m, nil
}

// jsonFigures replaces the gap figures, which are NaN without a leastconn→oracle gap.
type jsonFigures struct {
	Figures
	GapClosedP50 *float64 `json:"gap_closed_p50"`
	GapClosedP90 *float64 `json:"gap_closed_p90"`
}

func nullable(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.3f", x)
}

func seconds(s *float64) string {
	if s == nil {
		return "never"
	}
	return fmt.Sprintf("%.0fs", *s)
}

package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Pinning heavy clients through HAProxy's stick table (weighter/pin.go):
// the model's backend matches each new connection's client against its
// stick table (backend.choose), the daemon's Pinner decides the entries from
// the clients the fast reader lists, and the pin arms run the shipped daemon
// with it (docs/research/pinning.md).

// CarbonScenario is a few carbon-relays on a few caches: 4 servers, 8
// clients each holding one long-lived connection from its own address
// (2,000 / 2,000 / 200 / 150 / 120 / 60 / 40 / 20 lines/s), both 2,000/s
// relays on s1 at the start and the others two to a server as leastconn
// leaves them (max/mean 3.48); nothing connects unless shed, for 30 min.
// Weights move nothing here: only a shed moves a client, and only a pin
// says where it lands.
func CarbonScenario() Scenario {
	sc := LongLivedScenario()
	sc.Name = "carbon"
	sc.Servers, sc.Connections = 4, 8
	sc.Duration, sc.Warmup = 30*time.Minute, 0
	sc.Clients = []FixedClient{
		{2000, "s1"}, {2000, "s1"}, {200, "s2"}, {150, "s3"}, {120, "s4"}, {60, "s2"}, {40, "s3"}, {20, "s4"},
	}
	return sc
}

// CarbonShedPipeline is the shipped daemon shedding with
// weighter.DefaultShed but max_share 0.25: DefaultShed's 2 % of 8
// connections is none, so shedding alone never acts on the carbon scenario;
// this row shows what it does when it may.
func CarbonShedPipeline() Pipeline {
	p := weighter.DefaultShed()
	p.MaxShare = 0.25
	return ShippedShedPipeline(ShippedShedName+" max_share=0.25", p)
}

// WritePin writes the pin comparison as Markdown: per scenario, per
// pipeline, p50 / p90, the share of the leastconn → oracle gap closed on
// p50 and p90, sheds per hour per server (busiest) and lines lost per hour.
func (r *ShedResult) WritePin(w io.Writer) error {
	var b strings.Builder
	lc, or := r.Cell("leastconn"), r.Cell("oracle")
	b.WriteString("| scenario | pipeline | p50 | p90 | gap p50 | gap p90 | sheds/h/server (busiest) | lines lost/h |\n|---|---|---|---|---|---|---|---|\n")
	for si, sc := range r.Scenarios {
		for i, name := range r.Names {
			c := r.Cells[i][si]
			gap90 := math.NaN()
			if lc != nil && or != nil {
				gap90 = gapClosed(lc[si].P90, or[si].P90, c.P90)
			}
			sheds, lost := "–", "–"
			if c.Sheds {
				sheds = fmt.Sprintf("%.2f (%.1f)", c.PerHour, c.MaxPerHour)
				lost = fmt.Sprintf("%.0f", c.LostPerHour)
			}
			fmt.Fprintf(&b, "| %s | %s | %.3f | %.3f | %s | %s | %s | %s |\n", strings.TrimPrefix(sc.Name, "fresh-"), name,
				c.P50, c.P90, pct(c.GapP50), pct(gap90), sheds, lost)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Series is each pipeline's max/mean of the servers' true loads in every
// window of one run.
type Series struct {
	Scenario Scenario
	Names    []string
	Ends     []float64   // each window's end, seconds
	MaxMean  [][]float64 // [pipeline][window]
}

// RunSeries runs the pipelines over the scenario (RunFleet) and keeps each
// one's max/mean window by window.
func RunSeries(sc Scenario, pipelines []Pipeline) (*Series, error) {
	rep, err := RunFleet(sc, pipelines)
	if err != nil {
		return nil, err
	}
	out := &Series{Scenario: sc, Names: rep.names}
	for i, tr := range rep.traces {
		var row []float64
		for _, w := range tr.windows {
			if i == 0 {
				out.Ends = append(out.Ends, w.end)
			}
			r, _ := ratio(w.loads)
			row = append(row, r)
		}
		out.MaxMean = append(out.MaxMean, row)
	}
	return out, nil
}

// SettledBelow is, per pipeline, the end of the first window from which its
// max/mean stays at or below limit to the end of the run (NaN: it never settles).
func (s *Series) SettledBelow(limit float64) []float64 {
	out := make([]float64, len(s.Names))
	for i, row := range s.MaxMean {
		out[i] = math.NaN()
		for k := len(row) - 1; k >= 0 && row[k] <= limit; k-- {
			out[i] = s.Ends[k]
		}
	}
	return out
}

// WriteMarkdown writes the max/mean at the windows ending at each of at
// (seconds), one row per moment, then the mean over the run after each
// pipeline's settling and when it settled at or below limit.
func (s *Series) WriteMarkdown(w io.Writer, at []float64, limit float64) error {
	var b strings.Builder
	b.WriteString("| max/mean at |")
	for _, n := range s.Names {
		fmt.Fprintf(&b, " %s |", n)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(s.Names)) + "\n")
	for _, t := range at {
		k := -1
		for j, e := range s.Ends {
			if e <= t+1e-9 {
				k = j
			}
		}
		if k < 0 {
			continue
		}
		fmt.Fprintf(&b, "| %v |", time.Duration(s.Ends[k]*float64(time.Second)))
		for i := range s.Names {
			fmt.Fprintf(&b, " %.2f |", s.MaxMean[i][k])
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "| stays ≤ %.1f from |", limit)
	for _, t := range s.SettledBelow(limit) {
		if math.IsNaN(t) {
			b.WriteString(" never |")
			continue
		}
		fmt.Fprintf(&b, " %v |", time.Duration(t*float64(time.Second)))
	}
	b.WriteString("\n| mean over the run |")
	for i := range s.Names {
		fmt.Fprintf(&b, " %.2f |", mean(s.MaxMean[i]))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

package sim

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
)

// What haproxy-weighter-sim prints without flags (docs/simulator.md): the
// default scenario's comparison, every row, and after it the comparison of
// the lab and the production worlds, so that a first run shows the world the
// daemon is for (connections living hours, bursts, restarts, drift, many
// connections) and not only the lab's 30-second connections.

// OverviewWorld is the world the run without flags compares after the
// default scenario, with ProductionArms.
const OverviewWorld = WorldAll

// StarShipped returns the pipelines with the shipped daemon
// (ShippedPipeline) after the leading baselines, the only row marked
// default: a fresh-data comparison stars the pipeline the daemon ships, not
// the research candidate it was chosen as (RecommendedPipeline).
func StarShipped(pipelines []Pipeline) []Pipeline {
	out := slices.Clone(pipelines)
	for i := range out {
		out[i].Default = false
	}
	if i := slices.IndexFunc(out, func(p Pipeline) bool { return p.Name == ShippedName }); i >= 0 {
		out[i].Default = true
		return out
	}
	at := 0
	for at < len(out) && isFleetBaseline(out[at]) {
		at++
	}
	return slices.Insert(out, at, ShippedPipeline())
}

func isFleetBaseline(p Pipeline) bool {
	return slices.ContainsFunc(FleetBaselines(), func(b Pipeline) bool { return b.Name == p.Name && b.Kind == p.Kind })
}

// jsonWorld is a world comparison in JSON: what --world -o json prints, and
// the "world" key of the run without flags.
type jsonWorld struct {
	World     string              `json:"world"`
	Seeds     int                 `json:"seeds"`
	Scenarios []string            `json:"scenarios"`
	Pipelines []jsonWorldPipeline `json:"pipelines"`
}

// jsonWorldPipeline is one row of the world comparison: the shedding
// comparison's row (goals as --shed judges them) with whether it is the
// shipped daemon and whether it is never less even than leastconn.
type jsonWorldPipeline struct {
	Name    string `json:"name"`
	Default bool   `json:"default"`
	// NeverAboveLeastconn: p50 and p90 at most leastconn's on every
	// scenario (null for leastconn itself, or without it).
	NeverAboveLeastconn *bool           `json:"never_above_leastconn"`
	Goals               int             `json:"goals_met"`
	Of                  int             `json:"goals"`
	Cells               []jsonWorldCell `json:"cells"`
}

// jsonWorldCell adds the herding figure to a shedding cell: the most heavy
// clients of one burst on one server right after it, mean over the bursts
// and seeds and the most in any (null without bursts).
type jsonWorldCell struct {
	jsonShedCell
	HerdMean *float64 `json:"herd_mean"`
	HerdMost *float64 `json:"herd_most"`
	// Each seed's p50 and p90, in the order of the seeds (1, 2, ...).
	SeedP50 []float64 `json:"per_seed_p50"`
	SeedP90 []float64 `json:"per_seed_p90"`
}

// worldJSON is the comparison as jsonWorld, named world.
func (r *ShedResult) worldJSON(world string) jsonWorld {
	out := jsonWorld{World: world, Seeds: r.Seeds, Scenarios: []string{}, Pipelines: []jsonWorldPipeline{}}
	for _, sc := range r.Scenarios {
		out.Scenarios = append(out.Scenarios, strings.TrimPrefix(sc.Name, "fresh-"))
	}
	for i, name := range r.Names {
		n, of := r.Verdict(i).Passes()
		p := jsonWorldPipeline{Name: name, Default: name == ShippedName, Goals: n, Of: of}
		if ok, judged := r.neverAboveLeastconn(i); judged {
			p.NeverAboveLeastconn = &ok
		}
		for si, c := range r.Cells[i] {
			p.Cells = append(p.Cells, jsonWorldCell{jsonShedCell: r.jsonCell(i, si), HerdMean: nullable(c.Herd), HerdMost: nullable(c.HerdWorst),
				SeedP50: c.SeedP50, SeedP90: c.SeedP90})
		}
		out.Pipelines = append(out.Pipelines, p)
	}
	return out
}

// WriteWorldJSON writes the world comparison (named world) as indented JSON.
func (r *ShedResult) WriteWorldJSON(w io.Writer, world string) error {
	return writeIndented(w, r.worldJSON(world))
}

// WriteJSONWithWorld writes the report as WriteJSON does, with the world
// comparison (named world) as its "world" key: the run without flags.
func (r *Report) WriteJSONWithWorld(w io.Writer, world *ShedResult, name string) error {
	out, err := r.jsonReport()
	if err != nil {
		return err
	}
	wj := world.worldJSON(name)
	out.World = &wj
	return writeIndented(w, out)
}

func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

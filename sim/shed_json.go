package sim

import (
	"io"
	"math"
	"strings"
)

// jsonShedCell is one pipeline's seed-mean figures on one scenario, for JSON
// (NaN and infinity have no JSON form: a missing figure is null, a whale's
// server that never came back is whale_never).
type jsonShedCell struct {
	Scenario            string   `json:"scenario"`
	P50                 float64  `json:"p50"`
	P90                 float64  `json:"p90"`
	GapClosedP50        *float64 `json:"gap_closed_p50"`
	PerHourPerServer    *float64 `json:"sheds_per_hour_per_server"`
	MaxPerHourOneServer *float64 `json:"max_sheds_per_hour_one_server"`
	BytesInFlightMean   *float64 `json:"bytes_in_flight_mean"`
	BytesInFlightMax    *float64 `json:"bytes_in_flight_max"`
	// The slowest whale's recovery (seconds): mean over the seeds and the worst.
	WhaleRecoveryMean  *float64 `json:"whale_recovery_mean_seconds"`
	WhaleRecoveryWorst *float64 `json:"whale_recovery_worst_seconds"`
	WhaleNever         bool     `json:"whale_never"`
}

type jsonShedPipeline struct {
	Name  string         `json:"name"`
	Goals int            `json:"goals_met"`
	Of    int            `json:"goals"`
	Cells []jsonShedCell `json:"cells"`
}

// WriteJSON writes every pipeline's figures per scenario and the goals it
// meets (ShedResult.Verdict).
func (r *ShedResult) WriteJSON(w io.Writer) error {
	out := struct {
		Seeds     int                `json:"seeds"`
		Pipelines []jsonShedPipeline `json:"pipelines"`
	}{Seeds: r.Seeds}
	for i, name := range r.Names {
		n, of := r.Verdict(i).Passes()
		p := jsonShedPipeline{Name: name, Goals: n, Of: of}
		for si := range r.Cells[i] {
			p.Cells = append(p.Cells, r.jsonCell(i, si))
		}
		out.Pipelines = append(out.Pipelines, p)
	}
	return writeIndented(w, out)
}

// jsonCell is pipeline i's cell on scenario si for JSON.
func (r *ShedResult) jsonCell(i, si int) jsonShedCell {
	c := r.Cells[i][si]
	jc := jsonShedCell{
		Scenario: strings.TrimPrefix(r.Scenarios[si].Name, "fresh-"), P50: c.P50, P90: c.P90,
		GapClosedP50:       nullable(c.GapP50),
		WhaleRecoveryMean:  nullable(c.WhaleMean),
		WhaleRecoveryWorst: nullable(c.WhaleWorst),
		WhaleNever:         math.IsInf(c.WhaleWorst, 1),
	}
	if c.Sheds {
		jc.PerHourPerServer, jc.MaxPerHourOneServer = nullable(c.PerHour), nullable(c.MaxPerHour)
		jc.BytesInFlightMean, jc.BytesInFlightMax = nullable(c.BytesMean), nullable(c.BytesMax)
	}
	return jc
}

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/sim"
)

// The shedding pipeline is its own row, with its costs in JSON and in the table.
func TestShedPipelineRow(t *testing.T) {
	name := sim.RecommendedPipeline + sim.ShedPipelineSuffix
	args := []string{"--pipelines", sim.RecommendedPipeline + "," + name, "--scenario", "../../examples/scenarios/shed/whales.yaml", "--duration", "12m"}
	out, stderr, code := run(t, append(args, "-o", "json", "--shed-above", "1.3")...)
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Strategies []struct {
			Strategy string           `json:"strategy"`
			Shed     *sim.ShedFigures `json:"shed"`
		} `json:"strategies"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Strategies, 6) // the baselines, the shipped daemon, the two named
	for _, s := range rep.Strategies {
		assert.Equal(t, s.Strategy == name, s.Shed != nil, s.Strategy)
	}
	assert.Len(t, rep.Strategies[5].Shed.WhaleRecovery, 2)
	table, stderr, code := run(t, args...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, table, "shedding          sheds  per hour per server")
}

func TestShedComparison(t *testing.T) {
	out, stderr, code := run(t, "--shed", "--seeds", "1", "--scenario", "../../examples/scenarios/shed/whales.yaml", "--duration", "10m")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "| p50 / p90 (gap p50) | whales |")
	assert.Contains(t, out, "| "+sim.RecommendedPipeline+" shed |")
	assert.Contains(t, out, "slowest whale's server")
}

func TestShedFlagsUsageErrors(t *testing.T) {
	out, stderr, code := run(t, "--pipelines", sim.RecommendedPipeline+sim.ShedPipelineSuffix, "--shed-above", "1")
	assert.Equal(t, 2, code, stderr)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "error: shed factors: shed.above must be > 1")
}

// --shed -o json: every row (the default without and with shedding and the
// baselines) with its figures per scenario, costs only for shedding rows.
func TestShedComparisonJSON(t *testing.T) {
	out, stderr, code := run(t, "--shed", "--seeds", "1", "--scenario", "../../examples/scenarios/shed/whales.yaml", "--duration", "10m", "-o", "json")
	require.Equal(t, 0, code, stderr)
	var res struct {
		Seeds     int `json:"seeds"`
		Pipelines []struct {
			Name  string `json:"name"`
			Goals int    `json:"goals"`
			Cells []struct {
				Scenario string   `json:"scenario"`
				P50      float64  `json:"p50"`
				PerHour  *float64 `json:"sheds_per_hour_per_server"`
			} `json:"cells"`
		} `json:"pipelines"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, 1, res.Seeds)
	names := map[string]bool{}
	for _, p := range res.Pipelines {
		names[p.Name] = true
		require.Len(t, p.Cells, 1, p.Name)
		assert.Equal(t, "whales", p.Cells[0].Scenario)
		assert.Greater(t, p.Cells[0].P50, 1.0, p.Name)
		assert.Equal(t, strings.Contains(p.Name, "shed"), p.Cells[0].PerHour != nil, p.Name)
		assert.Equal(t, 3, p.Goals, p.Name) // below the oracle, the rate, the whales
	}
	for _, want := range []string{"leastconn", "agent-check", "oracle", sim.RecommendedPipeline, sim.RecommendedPipeline + sim.ShedPipelineSuffix} {
		assert.True(t, names[want], want)
	}
}

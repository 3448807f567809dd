package main

import (
	"encoding/json"
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
	require.Len(t, rep.Strategies, 5)
	for _, s := range rep.Strategies {
		assert.Equal(t, s.Strategy == name, s.Shed != nil, s.Strategy)
	}
	assert.Len(t, rep.Strategies[4].Shed.WhaleRecovery, 2)
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

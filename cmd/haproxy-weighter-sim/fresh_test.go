package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/sim"
)

// --pipelines runs the fresh-data model: the baselines, the shipped daemon
// (the row marked default), the named pipelines.
func TestPipelinesJSON(t *testing.T) {
	out, stderr, code := run(t, "--pipelines", "fast,"+sim.RecommendedPipeline, "--scenario", "../../examples/scenarios/fresh/fresh-three-balancers.yaml",
		"--duration", "6m", "-o", "json", "--external", "graphite-10s-delay-20s")
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Scenario   map[string]any `json:"scenario"`
		Strategies []struct {
			Strategy string `json:"strategy"`
			Default  bool   `json:"default"`
		} `json:"strategies"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, "20s", rep.Scenario["delay"], "--external sets the monitoring pipeline")
	assert.Equal(t, []any{0.5, 0.3, 0.2}, rep.Scenario["balancers"])
	var names []string
	for _, s := range rep.Strategies {
		names = append(names, s.Strategy)
		assert.Equal(t, s.Strategy == sim.ShippedName, s.Default, s.Strategy)
	}
	assert.Equal(t, []string{"leastconn", "agent-check", "oracle", sim.ShippedName, "fast", sim.RecommendedPipeline}, names)
}

func TestPipelinesUsageErrors(t *testing.T) {
	for args, want := range map[string][]string{
		`--pipelines: unknown pipeline "nope"`:  {"--pipelines", "nope"},
		`--external: unknown external "influx"`: {"--pipelines", "fast", "--external", "influx"},
	} {
		out, stderr, code := run(t, want...)
		assert.Equal(t, 2, code, stderr)
		assert.Empty(t, out)
		assert.Contains(t, stderr, "error: "+args)
	}
}

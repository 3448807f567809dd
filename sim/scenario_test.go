package sim

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExampleScenarios(t *testing.T) {
	files, err := filepath.Glob("../examples/scenarios/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		sc, err := LoadScenario(f)
		require.NoError(t, err, f)
		assert.Equal(t, filepath.Base(f), sc.Name+".yaml", "name matches the file")
	}
	def, err := LoadScenario("../examples/scenarios/default.yaml")
	require.NoError(t, err)
	assert.Equal(t, DefaultScenario(), def, "default.yaml is sim.DefaultScenario")
	for _, goal := range GoalScenarios() {
		sc, err := LoadScenario("../examples/scenarios/" + goal.Name + ".yaml")
		require.NoError(t, err)
		assert.Equal(t, goal, sc, "goal scenario %s has its file", goal.Name)
	}
}

func TestBadScenarios(t *testing.T) {
	for yaml, want := range map[string]string{
		"servers: 0":                        "servers must be at least 1",
		"bogus: 1":                          "field bogus not found",
		"window: 150ms":                     "window (150ms) must be a multiple of step (100ms)",
		"rate: {kind: zipf}":                `unknown kind "zipf"`,
		"events: [{at: 2h, kind: add}]":     "event 1 (add): at must fall inside the duration",
		"events: [{at: 1m, kind: remove}]":  "remove needs a server name",
		"events: [{at: 1m, kind: whale}]":   "whale needs count, rate and life",
		"events: [{at: 1m, kind: explode}]": "unknown kind",
		"events: [{at: 1m, kind: remove, server: s9}]\nduration: 5m": "",
	} {
		_, err := ParseScenario([]byte(yaml))
		if want == "" {
			assert.NoError(t, err, yaml)
			continue
		}
		if assert.Error(t, err, yaml) {
			assert.Contains(t, err.Error(), want, yaml)
		}
	}
}

func TestRemovingAnUnknownServerFails(t *testing.T) {
	sc := shortScenario()
	sc.Events = []Event{{At: sc.Warmup, Kind: EventRemove, Server: "s9"}}
	_, err := Run(sc, Baselines())
	assert.ErrorContains(t, err, `no server "s9" up`)
}

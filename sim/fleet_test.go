package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFleetOfOneIsTheModel checks that the fresh-data model with one balancer,
// cost 1 and no background places and scores exactly as Run does.
func TestFleetOfOneIsTheModel(t *testing.T) {
	sc := shortScenario()
	old, err := Run(sc, Baselines())
	require.NoError(t, err)
	fl, err := RunFleet(sc, FleetBaselines())
	require.NoError(t, err)
	for _, name := range []string{"leastconn", "agent-check", "oracle"} {
		assert.Equal(t, *old.Get(name), *fl.Get(name), name)
	}
}

func TestFreshScenarioFiles(t *testing.T) {
	for _, want := range FreshScenarios() {
		sc, err := LoadScenario("../examples/scenarios/fresh/" + want.Name + ".yaml")
		require.NoError(t, err)
		assert.Equal(t, want, sc, "fresh scenario %s has its file", want.Name)
	}
}

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/sim"
)

// --pin compares the pin arms over --world's scenarios (all when unset),
// or --scenario alone.
func TestPinComparesThePinArms(t *testing.T) {
	fl, f := parsed(t, "--pin")
	f.world = sim.WorldAll
	plan, err := worldPlanFromFlags(fl, f)
	require.NoError(t, err)
	assert.Equal(t, labAndProduction, scenarioNames(plan.scenarios))
	var names []string
	for _, p := range plan.pipelines {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"leastconn", "oracle", sim.ShippedName, sim.ShippedShedName, sim.ShippedPinName, sim.ShippedPinShedName}, names)

	out, errOut, code := run(t, "--pin", "--scenario", "../../examples/scenarios/pin/carbon.yaml", "--seeds", "1")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "| carbon | "+sim.ShippedPinShedName+" | ")
	assert.Contains(t, out, "gap p90")
}

package sim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func TestSweepRanksAndMarksTheDefault(t *testing.T) {
	def := weighter.DefaultPolicy()
	grid := Grid{
		Functions:       []string{def.Function},
		LimitingFactors: []float64{def.LimitingFactor},
		Aggressiveness:  []float64{def.Aggressiveness, 8},
		Deadbands:       []int{def.Deadband},
		MaxSteps:        []float64{def.MaxStep},
		PerConn:         []bool{false},
	}
	sc := shortScenario()
	res, err := Sweep([]Scenario{sc}, Seeds(1), grid)
	require.NoError(t, err)
	require.Len(t, res.Rows, 2)
	assert.GreaterOrEqual(t, res.Rows[0].MinGap, res.Rows[1].MinGap, "best first")
	for _, row := range res.Rows {
		require.Len(t, row.Cells, 1)
		assert.Equal(t, row.Strategy.Policy == def, row.Strategy.Default)
	}
	var md strings.Builder
	require.NoError(t, res.WriteMarkdown(&md, 10))
	assert.Contains(t, md.String(), "**"+PolicyLabel(def)+"** (current default)")
	assert.Equal(t, 2+3+2, strings.Count(md.String(), "\n"), "header, rule, 3 baselines, 2 policies")
}

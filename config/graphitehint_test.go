package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rate taken of carbon's own metrics (a count per CARBON_METRIC_INTERVAL,
// not a counter) loads, with a warning at the target's line that says what
// to write instead; the right form loads without one.
func TestGraphiteRateOfCarbonsOwnCountsIsAWarning(t *testing.T) {
	data := `backends:
  - name: be_carbon
    source:
      graphite:
        url: http://127.0.0.1:8080
        target: aliasByNode(perSecond(carbon.agents.*.metricsReceived), 2)
`
	cfg, err := Parse("c.yaml", []byte(data), noEnv)
	require.NoError(t, err)
	require.Len(t, cfg.Warnings, 1)
	assert.Regexp(t, `^c\.yaml:6: warning: backends\[0\] \(be_carbon\): source: graphite: target: perSecond\(\) of carbon's own metrics .*`+
		`count per CARBON_METRIC_INTERVAL \(default 60 s\), not as a counter.*scale\(carbon\.agents\.\*\.metricsReceived, 0\.0166667\)`, cfg.Warnings[0])

	right := `backends:
  - name: be_carbon
    source:
      graphite:
        url: http://127.0.0.1:8080
        target: aliasByNode(scale(carbon.agents.*.metricsReceived, 0.0166667), 2)
`
	cfg, err = Parse("c.yaml", []byte(right), noEnv)
	require.NoError(t, err)
	assert.Empty(t, cfg.Warnings)
}

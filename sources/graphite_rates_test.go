package sources

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func TestRateCallsReadTheTargetsSyntax(t *testing.T) {
	for target, want := range map[string][]rateCall{
		"perSecond(tcp.*.rx)": {{"perSecond", "tcp.*.rx"}},
		"aliasByNode(perSecond(carbon.agents.*.metricsReceived), 2)": {{"perSecond", "carbon.agents.*.metricsReceived"}},
		"nonNegativeDerivative( a.{b,c}.d , 100)":                    {{"nonNegativeDerivative", "a.{b,c}.d"}},
		"derivative(sumSeries(a.*.b, c.[ab].d))":                     {{"derivative", "sumSeries(a.*.b, c.[ab].d)"}},
		"perSecond(sumSeries(perSecond(a.*)))":                       {{"perSecond", "sumSeries(perSecond(a.*))"}, {"perSecond", "a.*"}},
		`alias(perSecond(x.y), "perSecond(z")`:                       {{"perSecond", "x.y"}},
		"scale(carbon.agents.*.metricsReceived, 0.0166667)":          nil,
		"aliasByNode(x.perSecond.y, 1)":                              nil, // a path node, not a call
		"myperSecond(x)":                                             nil,
		"perSecond(x":                                                nil, // not closed: graphite says why
	} {
		assert.Equal(t, want, rateCalls(target), target)
	}
}

func TestGraphiteHintsNameCarbonsOwnCountsUnderARate(t *testing.T) {
	for target, warns := range map[string]bool{
		"aliasByNode(perSecond(carbon.agents.*.metricsReceived), 2)": true,
		"nonNegativeDerivative(carbon.relays.*.metricsReceived)":     true,
		"sumSeries(derivative(carbon.aggregator.*.metricsReceived))": true,
		"scale(carbon.agents.*.metricsReceived, 0.0166667)":          false, // the right form
		"carbon.agents.*.metricsReceived":                            false, // a count per interval: proportional to the rate
		"perSecond(tcp.*.datapoints.received)":                       false, // a counter
		"perSecond(app.carbon.agents.x)":                             false, // another prefix: not carbon's own
	} {
		cfg := GraphiteConfig{Target: target}
		hints := cfg.Hints()
		if !warns {
			assert.Empty(t, hints, target)
			continue
		}
		if assert.Len(t, hints, 1, target) {
			assert.Equal(t, []string{"target"}, field.Keys(hints[0]), "the warning is at the target's line")
			assert.Contains(t, hints[0].Error(), "count per CARBON_METRIC_INTERVAL")
			assert.Contains(t, hints[0].Error(), "scale(carbon.agents.*.metricsReceived, 0.0166667)")
		}
	}
}

func TestStepsDownSkipsNulls(t *testing.T) {
	var s weighter.Series
	for i, v := range []float64{5, math.NaN(), 7, 6, math.Inf(1), 6, 9, 2} {
		s = append(s, weighter.Point{Time: time.Unix(int64(10*i), 0), Value: v})
	}
	downs, steps := stepsDown(s)
	assert.Equal(t, 2, downs, "7→6 and 9→2")
	assert.Equal(t, 5, steps, "5→7, 7→6, 6→6, 6→9, 9→2")
}

package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The agent reports ceil(100 − 100·load/capacity)%, clamped to 0..100, and HAProxy
// sets the weight to that share of the configured weight (100 here).
func TestAgentReportsFreeCapacity(t *testing.T) {
	b := newBackend(4, initialWeight, pickLeastconn)
	a := &agent{capacity: 300}
	assert.Zero(t, a.report(b, []*backend{b}, 0), "first round only reads the counters")
	for i, load := range []float64{0, 100, 150, 600} { // 0 %, 33.3 %, 50 %, 200 % of capacity
		if load > 0 {
			b.attach(i, load, 0)
		}
	}
	assert.Equal(t, 3, a.report(b, []*backend{b}, 2), "three weights changed")
	var got []int
	for _, s := range b.servers {
		got = append(got, s.weight)
	}
	assert.Equal(t, []int{100, 67, 50, 0}, got)
}

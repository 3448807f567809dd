package weighter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlanMaxStepBoundsShareWithHeldServer is the shape of the case a review found:
// every weight 256, one server (s4) without data, one (s1) much lighter than
// the rest. max_step bounds shares, not integers: s1's share doubles (1/4 →
// 1/2), s2's and s3's halve (1/4 → 1/8), s4's stays 1/4; the backend is then
// scaled by 0.5 so the largest weight is 256, which moves no traffic, so
// s2's integer weight goes 256 → 64, a factor 4, while its share halves.
func TestPlanMaxStepBoundsShareWithHeldServer(t *testing.T) {
	p := DefaultPolicy()
	c := mustController(t, p)
	servers := up(256, 256, 256, 256)
	plan := c.Plan(t0, loadsAt(t0, 50, 900, 1000, nan), servers)
	require.False(t, plan.Hold, plan.Reason)
	s := byServer(plan)
	for name, want := range map[string]int{"s1": 256, "s2": 64, "s3": 64, "s4": 128} {
		assert.Equal(t, want, s[name].New, name)
	}
	assert.InDelta(t, 0.5, plan.Scale, 1e-9)
	assert.Equal(t, ReasonRateLimit, s["s2"].Reason)
	assert.Equal(t, ReasonMissing+"; "+ReasonRescale+" (x0.5)", s["s4"].Reason)
	assert.Empty(t, checkShareStep(p, plan, map[string]int{"s1": 256, "s2": 256, "s3": 256, "s4": 256}, &maxStepStats{}))
}

// TestPlanMaxStepBoundsShareWhenAllReport: with every server reporting, the
// bound was taken on each integer weight after scaling the largest to 256,
// so a share could move by max_step²: from 256, 100, 10, 100 the function's
// 112, 56, 28, 256 were written as 128, 56, 20, 200, and s4's share went
// from .215 to .495 (x2.3 with max_step 2). Now it doubles, no more.
func TestPlanMaxStepBoundsShareWhenAllReport(t *testing.T) {
	p := free()
	p.MaxStep = 2
	c := mustController(t, p)
	before := map[string]int{"s1": 256, "s2": 100, "s3": 10, "s4": 100}
	plan := c.Plan(t0, loadsAt(t0, 10, 20, 40, 0), up(256, 100, 10, 100))
	var st maxStepStats
	assert.Empty(t, checkShareStep(p, plan, before, &st))
	assert.LessOrEqual(t, st.worst, 2.04, "the largest share move on the written integers (26 for 25.6)")
}

package weighter

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPlanRescaleReason: a server whose own change is inside the deadband
// while the backend is scaled up is still set (to its weight on the new
// scale, or it would lose share), and its reason says so: the factor, and
// the wanted weight that was not written when there was one.
func TestPlanRescaleReason(t *testing.T) {
	c := mustController(t, DefaultPolicy())
	// every weight 100: scale 2.56. s1, the lightest, wants 256, which is
	// exactly 100 × 2.56: nothing of its own changes.
	s := byServer(c.Plan(t0, loadsAt(t0, 10, 20, 40, 80), up(100, 100, 100, 100)))
	assert.Equal(t, ActionSet, s["s1"].Action)
	assert.Equal(t, 256, s["s1"].New)
	assert.Equal(t, ReasonRescale+" (x2.56)", s["s1"].Reason)

	// largest weight 128: scale 2. s2 at 64 scales to 128; the function
	// wants 256·10/20.4 = 125.5 → 125 or 126, 2 or 3 off: use deadband 4.
	p := DefaultPolicy()
	p.Deadband = 4
	c = mustController(t, p)
	s = byServer(c.Plan(t0, loadsAt(t0, 10, 20.4), up(128, 64)))
	raw := s["s2"].Raw
	assert.NotEqual(t, 128, raw, "the function must want a change of its own")
	assert.Less(t, abs(raw-128), p.Deadband)
	assert.Equal(t, ActionSet, s["s2"].Action)
	assert.Equal(t, 128, s["s2"].New, "moved with the backend, own change held")
	assert.Equal(t, ReasonRescale+" (x2); own change to "+strconv.Itoa(raw)+" < deadband, not written", s["s2"].Reason)
	assert.Equal(t, ActionSet, s["s1"].Action)
	assert.Equal(t, 256, s["s1"].New)
}

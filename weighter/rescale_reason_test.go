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
	// weights 100, 50, 25: scale 2.56. The function wants 256, 128, 64,
	// exactly 2.56 times as much: no share changes.
	s := byServer(c.Plan(t0, loadsAt(t0, 10, 20, 40), up(100, 50, 25)))
	for name, want := range map[string]int{"s1": 256, "s2": 128, "s3": 64} {
		assert.Equal(t, ActionSet, s[name].Action, name)
		assert.Equal(t, want, s[name].New, name)
		assert.Equal(t, ReasonRescale+" (x2.56)", s[name].Reason, name)
	}

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

package weighter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// carbonShed is the carbon world as the shed planner sees it.
func carbonShed(pins map[string]string) ShedInput {
	in := carbon()
	sh := ShedInput{Sessions: in.Sessions, Unit: "/s", Pins: pins}
	for _, sv := range in.Servers {
		sh.Servers = append(sh.Servers, ShedServer{Name: sv.Name, Load: sv.Load, Factor: 1})
	}
	return sh
}

// On a backend that pins, a close of a client pinned elsewhere is a move:
// max_share, the room rule and the cooldown give way to the check that it
// lowers the busier of the two servers; a client pinned to the hot server
// is never closed (it would come back).
func TestShedderMovesPinnedClients(t *testing.T) {
	pol := DefaultShed()
	pol.For, pol.MinAge = 1, 0

	// Today's guards, on a backend that does not pin: nothing.
	sh := must(NewShedder(pol))
	p := sh.Plan(now, carbonShed(nil))
	assert.Empty(t, p.Sheds)
	assert.Equal(t, "8 sessions × max_share 0.02 < 1", p.Reason)
	pol.MaxShare = 1
	p = must(NewShedder(pol)).Plan(now, carbonShed(nil))
	assert.Empty(t, p.Sheds)
	assert.Contains(t, p.Reason, "2 too heavy for any server")

	// Pinned: the one pinned away moves, even in cooldown.
	pol.MaxShare = 0.02
	sh = must(NewShedder(pol))
	pins := map[string]string{"10.0.0.1": "s1", "10.0.0.2": "s2"}
	sh.Commit(now.Add(-time.Minute), []ShedSession{{Client: "10.0.0.2:1"}})
	p = sh.Plan(now, carbonShed(pins))
	require.Len(t, p.Sheds, 1, p.Reason)
	assert.Equal(t, "0x2", p.Sheds[0].Session.ID)
	assert.Equal(t, "s2", p.Sheds[0].To)
	assert.InDelta(t, 2000/1150.0, p.Sheds[0].After, 1e-9)

	// Both pinned to the hot server: nothing, and the reason says why.
	p = must(NewShedder(pol)).Plan(now, carbonShed(map[string]string{"10.0.0.1": "s1", "10.0.0.2": "s1"}))
	assert.Empty(t, p.Sheds)
	assert.Contains(t, p.Reason, "2 pinned to it")

	// A move that does not lower the busier server is not made: s2 as
	// loaded as s1 once the relay lands.
	in := carbonShed(pins)
	in.Servers[1].Load = 2500
	p = must(NewShedder(pol)).Plan(now, in)
	assert.Empty(t, p.Sheds, p.Reason)
}

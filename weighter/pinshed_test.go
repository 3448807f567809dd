package weighter

import (
	"fmt"
	"math"
	"math/rand/v2"
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
// max_share and the room rule give way to the check that it lowers the
// busier of the two servers; the cooldown holds (one move per client); a
// client pinned to the hot server is never closed (it would come back).
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

	// Pinned: the one pinned away moves, once its cooldown is over.
	pol.MaxShare = 0.02
	sh = must(NewShedder(pol))
	pins := map[string]string{"10.0.0.1": "s1", "10.0.0.2": "s2"}
	sh.Commit(now.Add(-time.Minute), []ShedSession{{Client: "10.0.0.2:1"}})
	p = sh.Plan(now, carbonShed(pins))
	assert.Empty(t, p.Sheds, "moved again within its cooldown")
	assert.Contains(t, p.Reason, "1 client in cooldown or unknown")
	p = sh.Plan(now.Add(time.Duration(pol.Cooldown)), carbonShed(pins))
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

// Over random loads, sessions and pins: a shed of a client pinned elsewhere
// lowers the busier of the hot server and the pin's server; no session of a
// client pinned to the hot server is closed; no client in cooldown is
// closed, pinned or not; an unpinned session keeps to max_share as on a
// backend that does not pin.
func TestShedderPinnedMovesProperty(t *testing.T) {
	for seed := range uint64(1000) {
		rng := rand.New(rand.NewPCG(seed, 0x5bed))
		pol := DefaultShed()
		pol.For, pol.MinAge, pol.MaxPerMinute = 1, 0, 1+rng.IntN(4)
		pol.MaxShare = []float64{0.02, 0.5, 1}[rng.IntN(3)]
		sh := must(NewShedder(pol))
		n := 2 + rng.IntN(4)
		in := ShedInput{Pins: map[string]string{}}
		loads := map[string]float64{}
		for i := range n {
			in.Servers = append(in.Servers, ShedServer{Name: name(i), Load: pinValue(rng, 1000), Factor: 1})
			loads[name(i)] = in.Servers[i].Load
		}
		for i := range rng.IntN(12) {
			addr := fmt.Sprintf("10.0.0.%d", rng.IntN(8))
			in.Sessions = append(in.Sessions, ShedSession{ID: fmt.Sprintf("0x%x", i), Server: name(rng.IntN(n)), Client: addr + ":1", Age: time.Minute, Rate: pinValue(rng, 800)})
			if rng.IntN(2) == 0 {
				in.Pins[addr] = name(rng.IntN(n + 1)) // sometimes a server without data
			}
		}
		cooled := rng.IntN(3) == 0
		if cooled {
			sh.Commit(now.Add(-time.Second), []ShedSession{{Client: "10.0.0.1:1"}})
		}
		p := sh.Plan(now, in)
		ctx := fmt.Sprintf("seed %d: %+v\n%+v", seed, in, p)
		share := int(math.Floor(pol.MaxShare * float64(len(in.Sessions)) * (1 + 1e-12)))
		unpinned := 0
		for _, s := range p.Sheds {
			addr, _ := clientAddr(s.Session.Client)
			to, pinned := in.Pins[addr]
			require.NotEqual(t, p.Server, to, "a session pinned to the hot server closed\n%s", ctx)
			require.False(t, cooled && addr == "10.0.0.1", "a client in cooldown closed\n%s", ctx)
			if pinned && to != "" {
				require.Equal(t, to, s.To, ctx)
				require.Less(t, max(loads[p.Server]-s.Session.Rate, loads[to]+s.Session.Rate), loads[p.Server], ctx)
				loads[p.Server] -= s.Session.Rate
				loads[to] += s.Session.Rate
				continue
			}
			unpinned++
			loads[p.Server] -= s.Session.Rate
		}
		require.LessOrEqual(t, unpinned, share, "unpinned sessions keep to max_share\n%s", ctx)
	}
}

package weighter

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// pinValue is a rate or load as partial data gives them: mostly sensible,
// sometimes NaN, infinite, negative or zero.
func pinValue(rng *rand.Rand, scale float64) float64 {
	switch rng.IntN(12) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1)
	case 2:
		return -rng.Float64() * scale
	case 3:
		return 0
	}
	return rng.ExpFloat64() * scale
}

// randomPinInput is one cycle's input over servers s1..s<n> (and some
// unknown ones), with duplicates.
func randomPinInput(rng *rand.Rand, table map[string]string) PinInput {
	n := 1 + rng.IntN(7)
	var in PinInput
	for i := range n + rng.IntN(2) { // the last may duplicate a name
		sv := PinServer{Name: fmt.Sprintf("s%d", 1+i%n), Load: pinValue(rng, 1000), Pinnable: rng.IntN(4) > 0}
		sv.Factor = []float64{1, 0, math.NaN(), 0.5, 3}[rng.IntN(5)]
		in.Servers = append(in.Servers, sv)
	}
	server := func() string { return fmt.Sprintf("s%d", 1+rng.IntN(n+2)) } // s<n+1>, s<n+2>: unknown
	addr := func() string {
		if rng.IntN(30) == 0 {
			return ""
		}
		return fmt.Sprintf("10.0.0.%d", rng.IntN(20))
	}
	for range rng.IntN(25) {
		in.Clients = append(in.Clients, Client{Addr: addr(), Rate: pinValue(rng, 300), Conns: rng.IntN(4)})
	}
	if rng.IntN(10) == 0 {
		in.Clients = nil
	}
	for i := range rng.IntN(30) {
		in.Sessions = append(in.Sessions, ShedSession{ID: fmt.Sprintf("0x%x", i), Server: server(), Client: addr() + ":1", Rate: pinValue(rng, 300)})
	}
	in.Table = PinTable{Name: "be", Size: []int{0, 3, 10, 1000}[rng.IntN(4)]}
	for c, s := range table {
		in.Table.Pins = append(in.Table.Pins, Pin{Client: c, Server: s})
	}
	rng.Shuffle(len(in.Table.Pins), func(i, j int) { in.Table.Pins[i], in.Table.Pins[j] = in.Table.Pins[j], in.Table.Pins[i] })
	if rng.IntN(5) == 0 {
		in.Table.Pins = append(in.Table.Pins, Pin{Client: fmt.Sprintf("10.0.0.%d", rng.IntN(20)), Server: server()}) // a duplicate key or a new one
	}
	if rng.IntN(5) == 0 {
		in.Table.Stray = append(in.Table.Stray, addr())
	}
	in.Table.Used = len(in.Table.Pins) + len(in.Table.Stray) + rng.IntN(3)
	switch rng.IntN(12) {
	case 0:
		in.TableErr = fmt.Errorf("be: %w", ErrNoPinTable)
	case 1:
		in.TableErr = fmt.Errorf("be: %w", ErrPinTableFull)
	case 2:
		in.TableErr = errors.New("show table: timeout")
	}
	in.Hold = rng.IntN(8) == 0
	return in
}

// The Pinner's rules hold over any inputs, across cycles whose table is
// what the previous batch left (or empty: an HAProxy restart): no Set names
// a server that cannot take a pin; every pin on such a server is cleared;
// no client is set or cleared twice; new entries fit the table's room; the
// pins stay within max_pins; no more than max_moves pins move; the changes
// applied to the table give the wanted pins; no pin moves within settle of
// its placement; the plan is valid JSON.
func TestPinnerRulesHoldOverRandomInputs(t *testing.T) {
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 0x9117))
		pol := PinPolicy{Heavy: []float64{0.1, 0.25, 1}[rng.IntN(3)], MaxPins: 1 + rng.IntN(6), MinGain: rng.Float64() * 0.3,
			MaxMoves: rng.IntN(3), Forget: duration.Duration(time.Duration(1+rng.IntN(60)) * time.Second), Shared: rng.IntN(3) == 0,
			Settle: duration.Duration([]time.Duration{0, 5 * time.Second, 30 * time.Second}[rng.IntN(3)])}
		pn := mustPinner(t, pol)
		table := map[string]string{}
		at := now
		measured := map[string]bool{} // the clients with a rate at a cycle before
		placed := map[string]placement{}
		for cycle := range 12 {
			at = at.Add(time.Duration(1+rng.IntN(20)) * time.Second)
			if rng.IntN(10) == 0 {
				table = map[string]string{} // HAProxy restarted
			}
			wanted := pinMap(pn.Wanted())
			in := randomPinInput(rng, table)
			p := pn.Plan(at, in)
			ctx := fmt.Sprintf("seed %d cycle %d: in %+v\nplan %+v", seed, cycle, in, p)
			checkPinPlan(t, pol, in, wanted, placed, at, p, ctx)
			checkStorm(t, in, measured, p, ctx)
			maps.Copy(measured, measuredClients(in.Clients))
			_, err := json.Marshal(p)
			require.NoError(t, err, ctx)
			if in.TableErr == nil || errors.Is(in.TableErr, ErrPinTableFull) {
				table = applyPins(in.Table.Pins, p.Changes)
				for _, c := range in.Table.Stray {
					if _, set := table[c]; !set {
						delete(table, c)
					}
				}
			}
		}
	}
}

// checkPinPlan checks one plan; placed is where and when the earlier plans
// set each pin (for settle), and the plan's own placements are added to it.
func checkPinPlan(t *testing.T, pol PinPolicy, in PinInput, wanted map[string]string, placed map[string]placement, at time.Time, p PinPlan, ctx string) {
	t.Helper()
	pinnable := map[string]bool{}
	seen := map[string]bool{}
	for _, sv := range in.Servers {
		if !seen[sv.Name] {
			seen[sv.Name] = true
			pinnable[sv.Name] = sv.Pinnable
		}
	}
	cleared := map[string]bool{}
	for _, c := range p.Changes.Clear {
		require.False(t, cleared[c], "cleared twice: %s\n%s", c, ctx)
		cleared[c] = true
	}
	set := map[string]bool{}
	for _, s := range p.Changes.Set {
		require.True(t, pinnable[s.Server], "a Set to %s, which cannot take a pin\n%s", s.Server, ctx)
		require.False(t, set[s.Client], "set twice: %s\n%s", s.Client, ctx)
		set[s.Client] = true
	}
	for _, s := range p.Pins {
		require.True(t, pinnable[s.Server], "a pin to %s, which cannot take one\n%s", s.Server, ctx)
	}
	if errors.Is(in.TableErr, ErrNoPinTable) {
		require.True(t, p.Changes.Empty(), ctx)
		return
	}
	known := in.TableErr == nil || errors.Is(in.TableErr, ErrPinTableFull)
	inTable := map[string]string{}
	if known {
		for _, pin := range in.Table.Pins {
			if _, dup := inTable[pin.Client]; !dup && pin.Client != "" {
				inTable[pin.Client] = pin.Server
			}
		}
		for c, s := range inTable {
			if !pinnable[s] {
				require.True(t, cleared[c], "the pin of %s on %s, which cannot take one, is not cleared\n%s", c, s, ctx)
			}
		}
		for _, c := range in.Table.Stray {
			if _, ok := inTable[c]; !ok && c != "" {
				require.True(t, cleared[c], "stray %s not cleared\n%s", c, ctx)
			}
		}
	} else {
		for c, s := range wanted {
			if !pinnable[s] {
				require.True(t, cleared[c], "the Pinner's pin of %s on %s not cleared blind\n%s", c, s, ctx)
			}
		}
	}
	full := errors.Is(in.TableErr, ErrPinTableFull) || in.Table.Size > 0 && in.Table.Used >= in.Table.Size
	if !known || full {
		require.Empty(t, p.Changes.Set, ctx)
	}
	storm := map[string]bool{}
	for _, w := range p.Why {
		if w.Storm {
			storm[w.Client] = true
		}
	}
	if in.Hold {
		// Held loads decide no new pin; the pins the table lost are
		// written again where the Pinner had them, and a storm's
		// clients are placed (they reconnect anyway).
		for _, set := range p.Changes.Set {
			if !storm[set.Client] {
				require.Equal(t, wanted[set.Client], set.Server, "held: only a lost pin written again\n%s", ctx)
			}
		}
	}
	require.LessOrEqual(t, len(p.Pins), pol.MaxPins, ctx)
	if in.Table.Size > 0 && known {
		room := in.Table.Size - in.Table.Used
		for c := range inTable {
			if cleared[c] {
				room++
			}
		}
		added := 0
		for _, s := range p.Changes.Set {
			if _, ok := inTable[s.Client]; !ok || cleared[s.Client] {
				added++
			}
		}
		require.LessOrEqual(t, added, max(room, 0), "new entries beyond the table's room\n%s", ctx)
	}
	moves := 0
	for _, s := range p.Changes.Set {
		if old, ok := inTable[s.Client]; ok && !cleared[s.Client] && old != s.Server && pinnable[old] && !storm[s.Client] {
			moves++
		}
	}
	require.LessOrEqual(t, moves, pol.MaxMoves, ctx)
	// A pin the Pinner set (and still wants, in the table as it left it, on
	// a server that can still take it) does not move within settle, but
	// for a storm.
	for _, set := range p.Changes.Set {
		pl, ok := placed[set.Client]
		if ok && !storm[set.Client] && !cleared[set.Client] && pinnable[pl.server] && pl.server != set.Server && wanted[set.Client] == pl.server && inTable[set.Client] == pl.server {
			require.GreaterOrEqual(t, at.Sub(pl.at), time.Duration(pol.Settle), "the pin of %s moved from %s to %s within settle of being set\n%s", set.Client, pl.server, set.Server, ctx)
		}
	}
	for _, c := range p.Changes.Clear {
		delete(placed, c)
	}
	for _, set := range p.Changes.Set {
		if pl, ok := placed[set.Client]; !ok || pl.server != set.Server {
			placed[set.Client] = placement{set.Server, at}
		}
	}
	want := pinMap(p.Pins)
	if pol.Shared && known {
		// Another balancer's entries (not the Pinner's before the plan)
		// stay where they are, unless their server cannot take a pin.
		for c, s := range inTable {
			if _, mine := wanted[c]; mine {
				continue
			}
			require.Equal(t, !pinnable[s], cleared[c], "shared: another balancer's pin of %s on %s (pinnable %v) cleared %v\n%s", c, s, pinnable[s], cleared[c], ctx)
			if !cleared[c] { // withdrawn, it may be pinned anew as the Pinner's
				require.NotContains(t, pinMap(p.Changes.Set), c, "shared: another balancer's pin of %s set\n%s", c, ctx)
				require.NotContains(t, want, c, "shared: another balancer's pin of %s taken as the Pinner's\n%s", c, ctx)
				want[c] = s
			}
		}
	}
	if known && !in.Hold && !full {
		require.Equal(t, want, applyPins(in.Table.Pins, p.Changes), "the changes applied give the wanted pins\n%s", ctx)
	}
}

// placement is where and when a plan set a client's pin.
type placement struct {
	server string
	at     time.Time
}

// checkStorm: a client is placed as a storm's only when it had a rate at a
// cycle before and has no connection now, and only in a plan whose clients
// were listed.
func checkStorm(t *testing.T, in PinInput, before map[string]bool, p PinPlan, ctx string) {
	t.Helper()
	connected := map[string]bool{}
	for _, c := range in.Clients {
		if c.Conns > 0 {
			connected[c.Addr] = true
		}
	}
	n := 0
	for _, w := range p.Why {
		if !w.Storm {
			continue
		}
		n++
		require.True(t, before[w.Client], "storm pin of %s, never measured before\n%s", w.Client, ctx)
		require.False(t, connected[w.Client], "storm pin of %s, connected now\n%s", w.Client, ctx)
		require.NotNil(t, in.Clients, ctx)
	}
	require.LessOrEqual(t, n, p.Storm, ctx)
}

func measuredClients(cs []Client) map[string]bool {
	out := map[string]bool{}
	for _, c := range cs {
		if c.Rate > 0 && !math.IsInf(c.Rate, 0) && c.Addr != "" {
			out[c.Addr] = true
		}
	}
	return out
}

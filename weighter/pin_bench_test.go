package weighter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// pinBench is a backend of n servers and c known clients, each with one
// connection on a server (rates exponential, so a few percent are heavy),
// and a table holding pins of one client in 1,000, some on
// servers that cannot take one.
func pinBench(n, c int) PinInput {
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	in := PinInput{Table: PinTable{Name: "be", Size: 102400}, Unit: "B/s"}
	loads := make([]float64, n)
	for i := range c {
		addr := fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
		rate := rng.ExpFloat64() * 1000
		s := rng.IntN(n)
		loads[s] += rate
		in.Clients = append(in.Clients, Client{Addr: addr, Rate: rate, Conns: 1})
		in.Sessions = append(in.Sessions, ShedSession{ID: fmt.Sprintf("0x%x", i), Server: fmt.Sprintf("srv%05d", s), Client: addr + ":40000", Rate: rate})
		if i%1000 == 0 {
			in.Table.Pins = append(in.Table.Pins, Pin{Client: addr, Server: fmt.Sprintf("srv%05d", rng.IntN(n))})
		}
	}
	in.Table.Used = len(in.Table.Pins)
	for i := range n {
		in.Servers = append(in.Servers, PinServer{Name: fmt.Sprintf("srv%05d", i), Load: loads[i], Factor: 1, Pinnable: i%50 != 0})
	}
	return in
}

// BenchmarkPinnerPlan measures one Pinner.Plan: the target is 10,000
// servers and 100,000 known clients under 50 ms.
func BenchmarkPinnerPlan(b *testing.B) {
	for _, bc := range []struct{ n, c int }{{10, 100}, {1_000, 10_000}, {10_000, 100_000}} {
		b.Run(fmt.Sprintf("servers=%d/clients=%d", bc.n, bc.c), func(b *testing.B) {
			in := pinBench(bc.n, bc.c)
			pn := mustPinner(b, DefaultPin())
			at := now
			b.ReportAllocs()
			for b.Loop() {
				at = at.Add(time.Second)
				pn.Plan(at, in)
			}
		})
	}
}

// BenchmarkPinnerStorm measures a reconnect storm: one op is a plan with
// every client measured, then one with every connection closed (an HAProxy
// restart), which fills max_pins (1,000): the table's pins of clients not
// in the storm, then the heaviest of the storm's.
func BenchmarkPinnerStorm(b *testing.B) {
	in := pinBench(10_000, 100_000)
	gone := in
	gone.Clients, gone.Sessions = []Client{}, nil
	gone.Table.Pins, gone.Table.Used = nil, 0
	pn := mustPinner(b, DefaultPin())
	at := now
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(time.Second)
		pn.Plan(at, in)
		at = at.Add(time.Second)
		if p := pn.Plan(at, gone); p.Storm == 0 || len(p.Pins) != DefaultPin().MaxPins {
			b.Fatalf("storm pinned %d clients, %d pins in all, want %d: %s", p.Storm, len(p.Pins), DefaultPin().MaxPins, p.Reason)
		}
	}
}

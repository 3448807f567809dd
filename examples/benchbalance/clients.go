package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
)

// prodTraffic is the production scenarios' clients: each client has its own loopback
// address (127.x.y.z: Linux routes all of 127.0.0.0/8 to lo, so binding one needs no
// setup) and one connection to every arm, over which it writes the same whole lines at
// the same moments. Unlike the lab's clients, a client whose connection to one arm
// breaks (a shed: HAProxy closed it) reconnects to that arm alone, from the same address,
// and keeps its rate and its other connections: the arms keep seeing the same clients.
//
// Every write is of whole lines, so the lines a client wrote (what the kernel accepted)
// can be set against what the arm's sinks received: the difference is the lines lost
// with connections closed in flight.
type prodTraffic struct {
	addrs   []string // per arm dialled directly: its frontend
	place   func(rate float64) (string, func())
	conns   int
	median  float64 // lines/s
	sigma   float64
	maxRate float64 // lines/s
	life    time.Duration
	seed    uint64

	heavy       int
	heavyRate   float64 // lines/s
	burstAt     time.Duration
	burstWithin time.Duration

	driftShare float64       // share of clients whose rate changes ×10 or ÷10 once
	driftFrom  time.Duration // the changes happen at uniform moments in [driftFrom, driftTo)
	driftTo    time.Duration

	ramp time.Duration // the first clients connect at uniform moments within it (at least one tick)

	returning bool // a client that leaves comes back from its address with its rate

	restartAt     time.Duration // a connection that breaks in [restartAt, restartAt+30s) redials after a uniform delay within restartWithin
	restartWithin time.Duration

	driftsMu sync.Mutex
	drifts   []driftEvent // each client's change of rate, as it happened

	sent     []atomic.Int64 // lines written, per arm (the placed arm last)
	nextAddr atomic.Uint32
	start    time.Time
	lines    []byte // whole datapoint lines, shared read-only by every client
}

// heavyNet is the heavy clients' addresses' /16: HAProxy's `show sess` names them by it.
var heavyNet = net.IPv4(127, 200, 0, 0).To4()

func newProdTraffic(o options, seed uint64, addrs []string, place func(float64) (string, func())) *prodTraffic {
	perLine := float64(len(datapoint))
	t := &prodTraffic{
		addrs: addrs, place: place, conns: o.Traffic.Conns,
		median: o.Traffic.Median / perLine, sigma: o.Traffic.Sigma, maxRate: o.Traffic.MaxRate / perLine,
		life: o.Traffic.Lifetime, seed: seed,
		heavy: o.HeavyClients, heavyRate: o.HeavyRate, burstAt: o.BurstAt, burstWithin: o.BurstWithin,
		sent: make([]atomic.Int64, len(addrs)+1), ramp: max(o.Ramp, loadlab.Tick),
		returning: o.Returning,
	}
	if o.Scenario == scenarioRestart {
		t.restartAt, t.restartWithin = o.RestartAt, o.RestartWithin
	}
	if o.Scenario == scenarioDrift {
		t.driftShare, t.driftFrom, t.driftTo = o.DriftShare, o.Warmup, o.Duration
	}
	// Enough lines for the fastest client's backlog (maxPending) plus one tick.
	most := math.Max(t.maxRate, t.heavyRate) * 10
	if t.driftShare > 0 {
		most *= 10
	}
	t.lines = bytes.Repeat(datapoint, maxPending(most)+int(most*loadlab.Tick.Seconds())+2)
	return t
}

// maxPending is how many lines a client keeps for an arm it is not connected to (2 s of
// its rate): a client reconnecting after a shed sends them on its new connection, as a
// client with a send buffer does; older lines are dropped unsent (not counted as sent).
func maxPending(rate float64) int { return int(2*rate) + 1 }

// run plays every client until ctx ends, then waits for all to close their connections.
func (t *prodTraffic) run(ctx context.Context) {
	t.start = time.Now()
	var wg sync.WaitGroup
	for i := range t.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.client(ctx, rand.New(rand.NewPCG(t.seed, uint64(i))))
		}()
	}
	for k := range t.heavy {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(t.seed, 1<<32+uint64(k)))
			at := t.burstAt + time.Duration(rng.Int64N(int64(max(t.burstWithin, 1))))
			if !loadlab.SleepCtx(ctx, time.Until(t.start.Add(at))) {
				return
			}
			// A heavy client stays to the end of the run: its burst is what is measured.
			t.session(ctx, rng, heavyAddr(k), t.heavyRate, 0, false)
		}()
	}
	wg.Wait()
}

// client plays one client after another from the same stream of the seed: when one
// leaves, a new one with a fresh rate, life and address connects; with -returning the
// same one comes back after 0.1-2 s from its address, with its rate, for a fresh life.
func (t *prodTraffic) client(ctx context.Context, rng *rand.Rand) {
	// The first connections spread over -ramp (at least one tick, as the lab's): each
	// placed by the weights of its moment. One draw either way: the seed's clients stay.
	if !loadlab.SleepCtx(ctx, time.Duration(rng.Int64N(int64(t.ramp)))) {
		return
	}
	var addr net.IP
	var rate float64
	for ctx.Err() == nil {
		drawn, life := loadlab.DrawClient(rng, t.median, t.sigma, t.maxRate, t.life)
		drift := t.driftShare > 0 && rng.Float64() < t.driftShare
		switch {
		case addr == nil || !t.returning: // a seed's stream as before -returning was
			addr, rate = clientAddr(t.nextAddr.Add(1)-1), drawn
		case !loadlab.SleepCtx(ctx, returnDelay(rng)):
			return
		}
		t.session(ctx, rng, addr, rate, life, drift)
	}
}

// returnDelay is how long a returning client stays away: uniform in [0.1 s, 2 s), as
// a relay or an agent reconnects (the simulator's returning clients).
func returnDelay(rng *rand.Rand) time.Duration {
	return 100*time.Millisecond + time.Duration(rng.Int64N(int64(1900*time.Millisecond)))
}

// clientAddr is the n-th ordinary client's address: 127.1.0.1, 127.1.0.2, … (last octet
// 1..254).
func clientAddr(n uint32) net.IP {
	hi := n / 254
	return net.IPv4(127, byte(1+hi/256), byte(hi%256), byte(n%254+1))
}

// heavyAddr is the k-th heavy client's address: 127.200.0.1, …
func heavyAddr(k int) net.IP { return net.IPv4(127, 200, byte(k/254), byte(k%254+1)) }

// session is one client's life: rate lines/s for life (0: until ctx ends) over one
// connection to each arm. With drift, its rate becomes ×10 or ÷10 (a coin) at a moment
// drawn in [driftFrom, driftTo) of the run, if its life lasts that long.
func (t *prodTraffic) session(ctx context.Context, rng *rand.Rand, ip net.IP, rate float64, life time.Duration, drift bool) {
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: ip}}
	arms := len(t.addrs) + 1
	conns := make([]net.Conn, arms)
	releases := make([]func(), arms)
	pending := make([]int, arms)
	redialAt := make([]time.Time, arms) // a broken connection's redial waits until then (a restart's reconnect storm)
	drop := func(a int) {
		if conns[a] != nil {
			conns[a].Close()
			conns[a] = nil
		}
		if releases[a] != nil {
			releases[a]()
			releases[a] = nil
		}
	}
	defer func() {
		for a := range arms {
			drop(a)
		}
	}()
	dial := func(a int) {
		addr := ""
		if a < len(t.addrs) {
			addr = t.addrs[a]
		} else {
			addr, releases[a] = t.place(rate)
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			drop(a) // tried again at the next tick
			return
		}
		conns[a] = c
	}
	for a := range arms {
		dial(a)
	}
	var end <-chan time.Time
	if life > 0 {
		tm := time.NewTimer(life)
		defer tm.Stop()
		end = tm.C
	}
	var driftAt <-chan time.Time
	factor := 1.0
	if drift {
		at := t.driftFrom + time.Duration(rng.Int64N(int64(max(t.driftTo-t.driftFrom, 1))))
		factor = 10
		if rng.IntN(2) == 0 {
			factor = 0.1
		}
		if wait := time.Until(t.start.Add(at)); wait > 0 {
			tm := time.NewTimer(wait)
			defer tm.Stop()
			driftAt = tm.C
		}
	}
	tk := time.NewTicker(loadlab.Tick)
	defer tk.Stop()
	owed := 0.0
	for {
		select {
		case <-ctx.Done():
			return
		case <-end:
			return
		case <-driftAt:
			t.driftsMu.Lock()
			t.drifts = append(t.drifts, driftEvent{At: time.Since(t.start), Client: ip.String(), From: rate, To: rate * factor})
			t.driftsMu.Unlock()
			rate *= factor
			driftAt = nil
		case <-tk.C:
			owed += rate * loadlab.Tick.Seconds()
			n := int(owed)
			owed -= float64(n)
			for a := range arms {
				pending[a] = min(pending[a]+n, maxPending(rate))
				if conns[a] == nil && !time.Now().Before(redialAt[a]) {
					dial(a)
				}
				if conns[a] == nil || pending[a] == 0 {
					continue
				}
				_ = conns[a].SetWriteDeadline(time.Now().Add(2 * time.Second))
				w, err := conns[a].Write(t.lines[:pending[a]*len(datapoint)])
				// Every write starts on a line: its whole lines are w / line length.
				full := w / len(datapoint)
				t.sent[a].Add(int64(full))
				pending[a] -= full
				if err != nil {
					drop(a) // closed under it (a shed): reconnect at the next tick
					if since := time.Since(t.start); t.restartWithin > 0 && since >= t.restartAt && since < t.restartAt+30*time.Second {
						// Its HAProxy restarted: every client reconnects within restartWithin.
						redialAt[a] = time.Now().Add(time.Duration(rng.Int64N(int64(t.restartWithin))))
					}
				}
			}
		}
	}
}

// sentLines is what the clients wrote to each arm so far, in arm order (the placed arm
// last).
func (t *prodTraffic) sentLines() []int64 {
	out := make([]int64, len(t.sent))
	for i := range t.sent {
		out[i] = t.sent[i].Load()
	}
	return out
}

// driftEvent is one client's change of rate (lines/s) during a run.
type driftEvent struct {
	At       time.Duration // since the traffic started
	Client   string
	From, To float64
}

// writeDrifts writes the run's drifts, in the order they happened (drifts.tsv).
func (t *prodTraffic) writeDrifts(w io.Writer) error {
	t.driftsMu.Lock()
	defer t.driftsMu.Unlock()
	if _, err := fmt.Fprintln(w, "at_s\tclient\tfrom\tto"); err != nil {
		return err
	}
	for _, d := range t.drifts {
		if _, err := fmt.Fprintf(w, "%.1f\t%s\t%.0f\t%.0f\n", d.At.Seconds(), d.Client, d.From, d.To); err != nil {
			return err
		}
	}
	return nil
}

package weighter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// pinTarget is a closingTarget with a pin table: it applies a batch as
// HAProxy does (Clear, the weights, Set) and records each batch and close
// in events.
type pinTarget struct {
	closingTarget
	table    map[string]string // client → server
	size     int
	admin    map[string]AdminState // servers an operator took over
	pinsErr  error                 // the table read's error
	pinFail  error                 // every Set fails with it
	pinReads int
}

func (p *pinTarget) Servers(ctx context.Context) ([]ServerState, error) {
	out, err := p.fakeTarget.Servers(ctx)
	for i := range out {
		if a, ok := p.admin[out[i].Name]; ok {
			out[i].Admin = a
		}
	}
	return out, err
}

func (p *pinTarget) Pins(context.Context) (PinTable, error) {
	p.pinReads++
	if p.pinsErr != nil {
		return PinTable{}, p.pinsErr
	}
	t := PinTable{Name: "be", Size: p.size, Used: len(p.table)}
	for _, c := range slices.Sorted(maps.Keys(p.table)) {
		t.Pins = append(t.Pins, Pin{Client: c, Server: p.table[c]})
	}
	return t, nil
}

func (p *pinTarget) SetWeightsAndPins(ctx context.Context, changes []Change, pins PinChanges) error {
	p.events = append(p.events, fmt.Sprintf("batch clear=%v weights=%d set=%v", pins.Clear, len(changes), pins.Set))
	for _, c := range pins.Clear {
		delete(p.table, c)
	}
	var errs []error
	if len(changes) > 0 {
		if err := p.fakeTarget.SetWeights(ctx, changes); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range pins.Set {
		if p.pinFail != nil {
			errs = append(errs, &PinError{Client: s.Client, Err: p.pinFail})
			continue
		}
		p.table[s.Client] = s.Server
	}
	return errors.Join(errs...)
}

// pinSource is a shedSource whose fast read lists the clients.
type pinSource struct {
	shedSource
	clients []Client
}

func (s *pinSource) FetchSignal(ctx context.Context, servers []ServerState) (Loads, *Signal, error) {
	loads, sig, err := s.shedSource.FetchSignal(ctx, servers)
	if sig != nil {
		sig.Clients = s.clients
	}
	return loads, sig, err
}

// carbonBackend is the carbon world as a weighed backend that pins: four
// caches, eight long-lived connections, two 2,000 B/s relays on s1.
func carbonBackend(t *testing.T) (*Weigher, *pinSource, *pinTarget) {
	t.Helper()
	src := &pinSource{shedSource: shedSource{pipeline: PipelineFast, rates: map[string]float64{"s1": 4000, "s2": 200, "s3": 200, "s4": 200}}}
	src.loads = map[string]float64{"s1": 4000, "s2": 200, "s3": 200, "s4": 200}
	in := carbon()
	src.clients, src.sessions = in.Clients, in.Sessions
	tgt := &pinTarget{closingTarget: closingTarget{fakeTarget: fakeTarget{weights: map[string]int{"s1": 100, "s2": 100, "s3": 100, "s4": 100}}, gone: map[string]bool{}},
		table: map[string]string{}, size: 100}
	return &Weigher{Name: "be", Source: src, Target: tgt, Controller: mustController(t, testPolicy()), Pinner: mustPinner(t, DefaultPin())}, src, tgt
}

// The pins go in the weights' batch; the next cycle finds them in the table.
func TestRunCycleWritesPinsWithTheWeights(t *testing.T) {
	b, _, tgt := carbonBackend(t)
	c := RunCycle(context.Background(), b, now, true)
	require.NoError(t, c.Err)
	assert.Equal(t, ResultOK, c.Result)
	require.NotNil(t, c.Plan.Pins)
	assert.Equal(t, []string{"batch clear=[] weights=4 set=[{10.0.0.1 s1} {10.0.0.2 s2}]"}, tgt.events)
	assert.Equal(t, map[string]string{"10.0.0.1": "s1", "10.0.0.2": "s2"}, tgt.table)
	assert.Len(t, tgt.batches, 1)

	// The weights settled and the pins in place: nothing is written.
	cycles := 1
	for i := range 5 {
		cycles++
		tgt.events = nil
		c = RunCycle(context.Background(), b, now.Add(time.Duration(i+1)*time.Second), true)
		require.NoError(t, c.Err)
		if len(c.Plan.Changes()) == 0 {
			break
		}
	}
	assert.Empty(t, c.Plan.Changes())
	assert.True(t, c.Plan.Pins.Changes.Empty())
	assert.Empty(t, tgt.events)
	assert.Equal(t, cycles, tgt.pinReads, "read every cycle")
}

// Pins change with no weight change: written alone.
func TestRunCycleWritesPinsWithoutWeightChanges(t *testing.T) {
	b, _, tgt := carbonBackend(t)
	for i := 0; i == 0 || len(RunCycle(context.Background(), b, now, true).Plan.Changes()) > 0; i++ {
		require.Less(t, i, 5, "the weights settle")
	}
	tgt.events = nil
	clear(tgt.table) // HAProxy restarted without peers: the table is empty
	c := RunCycle(context.Background(), b, now.Add(time.Second), true)
	require.NoError(t, c.Err)
	assert.Empty(t, c.Plan.Changes())
	assert.Equal(t, []string{"batch clear=[] weights=0 set=[{10.0.0.1 s1} {10.0.0.2 s2}]"}, tgt.events, "written again at once")
	assert.Equal(t, map[string]string{"10.0.0.1": "s1", "10.0.0.2": "s2"}, tgt.table)
}

// A dry run writes nothing and prints what it would pin.
func TestRunCycleDryRunWritesNoPins(t *testing.T) {
	b, _, tgt := carbonBackend(t)
	c := RunCycle(context.Background(), b, now, false)
	require.NoError(t, c.Err)
	assert.Empty(t, tgt.events)
	assert.Empty(t, tgt.table)
	assert.Equal(t, []string{
		"would pin 10.0.0.1 (2,000 B/s, 1.74× mean server load) to s1, where it sits",
		"would pin 10.0.0.2 (2,000 B/s, 1.74× mean server load) to s2, now on s1: projected max/mean 1.57 lower",
		"pins: 2 wanted (projected max/mean 1.91, 3.48 with the clients where they sit)",
	}, PinLines(c.Plan.Pins, true))

	// The next dry run finds the table as it is and says the same.
	c = RunCycle(context.Background(), b, now.Add(time.Second), false)
	assert.Equal(t, []string{
		"would pin 10.0.0.1 (2,000 B/s, 1.74× mean server load) to s1, where it sits",
		"would pin 10.0.0.2 (2,000 B/s, 1.74× mean server load) to s2, now on s1: projected max/mean 1.57 lower",
		"pins: 2 wanted (projected max/mean 1.91, 3.48 with the clients where they sit)",
	}, PinLines(c.Plan.Pins, true))
	assert.Empty(t, tgt.events)
}

// A server an operator drains, or the weight plan drains this cycle, loses
// its pins in the batch that drains it, before the weights.
func TestRunCycleWithdrawsPinsOfDrainedServers(t *testing.T) {
	b, _, tgt := carbonBackend(t)
	RunCycle(context.Background(), b, now, true)
	require.Equal(t, "s2", tgt.table["10.0.0.2"])
	tgt.events = nil
	tgt.admin = map[string]AdminState{"s2": AdminDrain}
	c := RunCycle(context.Background(), b, now.Add(time.Second), true)
	require.NoError(t, c.Err)
	require.Len(t, tgt.events, 1)
	assert.True(t, strings.HasPrefix(tgt.events[0], "batch clear=[10.0.0.2] "), tgt.events[0])
	assert.NotEqual(t, "s2", tgt.table["10.0.0.2"])
	assert.NotContains(t, c.Plan.Pins.Changes.Set, Pin{"10.0.0.2", "s2"})

	// drain_above: the weight plan drains s1 (4,000 > 3,000) this cycle.
	b, _, tgt = carbonBackend(t)
	p := testPolicy()
	p.DrainAbove, p.ResumeBelow, p.MaxDrained = 3000, 1000, 0.5
	b.Controller = mustController(t, p)
	tgt.table["10.0.0.1"] = "s1"
	c = RunCycle(context.Background(), b, now, true)
	require.NoError(t, c.Err)
	require.Equal(t, 0, byServer(c.Plan)["s1"].New, "s1 drained")
	assert.Contains(t, c.Plan.Pins.Changes.Clear, "10.0.0.1")
	for _, s := range c.Plan.Pins.Changes.Set {
		assert.NotEqual(t, "s1", s.Server)
	}
	assert.NotEqual(t, "s1", tgt.table["10.0.0.1"])
}

// Held by the coverage guard: the withdrawals are written, nothing set, no weight.
func TestRunCycleHeldWritesWithdrawalsOnly(t *testing.T) {
	b, src, tgt := carbonBackend(t)
	tgt.table = map[string]string{"10.0.0.1": "s1", "10.0.0.2": "s2"}
	tgt.admin = map[string]AdminState{"s2": AdminMaint}
	src.loads = map[string]float64{"s1": 4000}
	for name := range src.rates {
		if name != "s1" {
			delete(src.rates, name)
		}
	}
	c := RunCycle(context.Background(), b, now, true)
	assert.Equal(t, ResultSkippedCoverage, c.Result)
	assert.Equal(t, []string{"batch clear=[10.0.0.2] weights=0 set=[]"}, tgt.events)
	assert.Equal(t, map[string]string{"10.0.0.1": "s1"}, tgt.table)
}

// No pin table is no failure; an unreadable one is the plan's pin reason,
// and the weights are written.
func TestRunCycleWithoutAPinTableWeighsOn(t *testing.T) {
	b, _, tgt := carbonBackend(t)
	tgt.pinsErr = fmt.Errorf("backend be: %w", ErrNoPinTable)
	c := RunCycle(context.Background(), b, now, true)
	require.NoError(t, c.Err)
	assert.Equal(t, ResultOK, c.Result)
	assert.Equal(t, "no pin table: backend be: no pin table", c.Plan.Pins.Reason)
	assert.Equal(t, []string{"batch clear=[] weights=4 set=[]"}, tgt.events)

	b, _, tgt = carbonBackend(t)
	tgt.pinsErr = errors.New("show table: timeout")
	c = RunCycle(context.Background(), b, now, true)
	require.NoError(t, c.Err)
	assert.Equal(t, "pin table could not be read: show table: timeout", c.Plan.Pins.Reason)
	assert.Len(t, c.Written, 4)

	// A pin write that fails fails no weight, and the cycle says so.
	b, _, tgt = carbonBackend(t)
	tgt.pinFail = errors.New("table full")
	c = RunCycle(context.Background(), b, now, true)
	assert.Equal(t, ResultTargetError, c.Result)
	assert.ErrorContains(t, c.Err, "write weights and pins: pin 10.0.0.1: table full")
	assert.Len(t, c.Written, 4, "the weights were written")

	// A target without a table: SetWeights as before, no pins read.
	b, _, _ = carbonBackend(t)
	plain := &fakeTarget{weights: map[string]int{"s1": 100, "s2": 100, "s3": 100, "s4": 100}}
	b.Target = plain
	c = RunCycle(context.Background(), b, now, true)
	require.NoError(t, c.Err)
	assert.Nil(t, c.Plan.Pins)
	assert.Len(t, plain.batches, 1)
}

// The carbon world with shedding: four servers, eight long-lived
// connections, two 2,000/s relays on one server. Without pins max_share
// (2 % of 8 sessions), the room rule and the landing rule refuse every
// close; with pins the relay pinned away is pinned first, in the batch,
// then closed, and lands where its pin says.
func TestRunCycleShedMovesAPinnedClientOfAHandfulOfConnections(t *testing.T) {
	shed := DefaultShed()
	shed.For = 1
	shed.MinAge = duration.Duration(time.Second)

	b, _, tgt := carbonBackend(t)
	b.Pinner = nil
	b.Shedder = must(NewShedder(shed))
	c := RunCycle(context.Background(), b, now, true)
	require.NoError(t, c.Err)
	assert.Empty(t, c.Plan.Shed.Sheds)
	assert.Equal(t, "8 sessions × max_share 0.02 < 1", c.Plan.Shed.Reason)

	b, _, tgt = carbonBackend(t)
	b.Shedder = must(NewShedder(shed))
	c = RunCycle(context.Background(), b, now, true)
	require.NoError(t, c.Err)
	require.Len(t, c.Plan.Shed.Sheds, 1, c.Plan.Shed.Reason)
	sh := c.Plan.Shed.Sheds[0]
	assert.Equal(t, "0x2", sh.Session.ID)
	assert.Equal(t, "s2", sh.To)
	assert.Contains(t, sh.Reason, "; pinned to s2")
	assert.Equal(t, []string{"batch clear=[] weights=4 set=[{10.0.0.1 s1} {10.0.0.2 s2}]", "close 0x2"}, tgt.events,
		"pinned in the batch, then closed")
	require.Len(t, c.Sheds, 1)
	assert.Equal(t, ShedClosed, c.Sheds[0].Outcome)

	// A failed pin write closes nothing: the client would land by lottery.
	b, _, tgt = carbonBackend(t)
	b.Shedder = must(NewShedder(shed))
	tgt.pinFail = errors.New("boom")
	c = RunCycle(context.Background(), b, now, true)
	assert.Empty(t, c.Sheds)
	assert.NotContains(t, tgt.events, "close 0x2")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

package weighter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// shedSource is a SignalSource whose fast signal gives each server a byte
// rate and lists the sessions.
type shedSource struct {
	fakeSource
	rates    map[string]float64
	sessions []ShedSession
	pipeline string
	age      time.Duration
	at       time.Time // the fast read's time (zero: unknown)
}

func (s *shedSource) FetchSignal(ctx context.Context, _ []ServerState) (Loads, *Signal, error) {
	loads, err := s.Fetch(ctx, nil)
	sig := &Signal{Pipeline: s.pipeline, Fast: FastLive, FastAge: s.age, FastAt: s.at, Servers: map[string]FastInput{}, Sessions: s.sessions}
	if s.pipeline == PipelineExternal {
		sig.Fast, sig.FastReason = FastDead, "fast signal read failed: boom"
	}
	for name, r := range s.rates {
		sig.Servers[name] = FastInput{Local: r, Sessions: 1, Factor: 1}
	}
	return loads, sig, err
}

// closingTarget is a fakeTarget that closes sessions, recording the order
// of writes and closes.
type closingTarget struct {
	fakeTarget
	events []string
	gone   map[string]bool // sessions that ended before the close
	fail   error
}

func (c *closingTarget) SetWeights(ctx context.Context, changes []Change) error {
	c.events = append(c.events, "weights")
	return c.fakeTarget.SetWeights(ctx, changes)
}

func (c *closingTarget) CloseSession(_ context.Context, s ShedSession) error {
	c.events = append(c.events, "close "+s.ID)
	switch {
	case c.fail != nil:
		return c.fail
	case c.gone[s.ID]:
		return fmt.Errorf("%w: no such session", ErrSessionGone)
	}
	return nil
}

// whaleBackend: four servers, s1 carries a 1,000 B/s whale and four 300 B/s
// sessions, s2 and s3 four 100 B/s each, s4 one: s1 is hot (2,200 against a
// mean of 775) and the whale fits on s4 (1,100 < 1.5 × 775). Shedding after
// one hot cycle.
func whaleBackend(t *testing.T) (*Weigher, *shedSource, *closingTarget) {
	t.Helper()
	c, err := NewController(testPolicy())
	require.NoError(t, err)
	sh, err := NewShedder(ShedPolicy{Above: 1.5, For: 1, MaxPerMinute: 1, MaxShare: 0.1, MinAge: duration.Duration(time.Second), Cooldown: duration.Duration(time.Minute)})
	require.NoError(t, err)
	src := &shedSource{pipeline: PipelineFast, rates: map[string]float64{"s1": 2200, "s2": 400, "s3": 400, "s4": 100}}
	src.loads = map[string]float64{"s1": 680, "s2": 100, "s3": 100, "s4": 100}
	add := func(server string, n int, rate float64) {
		for range n {
			i := len(src.sessions) + 1
			src.sessions = append(src.sessions, ShedSession{ID: fmt.Sprintf("0x%x", i), Serial: uint64(i), Server: server,
				Client: fmt.Sprintf("10.0.0.%d:5000", i), Age: time.Minute, Rate: rate})
		}
	}
	add("s1", 1, 1000)
	add("s1", 4, 300)
	add("s2", 4, 100)
	add("s3", 4, 100)
	add("s4", 1, 100)
	tgt := &closingTarget{fakeTarget: fakeTarget{weights: map[string]int{"s1": 100, "s2": 100, "s3": 100, "s4": 100}}, gone: map[string]bool{}}
	return &Weigher{Name: "be", Source: src, Target: tgt, Controller: c, Shedder: sh}, src, tgt
}

func TestRunCycleShedsTheWhaleAfterWritingWeights(t *testing.T) {
	b, _, tgt := whaleBackend(t)
	c := RunCycle(context.Background(), b, now, true)
	require.NoError(t, c.Err)
	assert.Equal(t, ResultOK, c.Result)
	require.NotNil(t, c.Plan.Shed)
	require.Len(t, c.Plan.Shed.Sheds, 1, c.Plan.Shed.Reason)
	assert.Equal(t, "0x1", c.Plan.Shed.Sheds[0].Session.ID)
	assert.Equal(t, []string{"weights", "close 0x1"}, tgt.events, "closed after the weights are written")
	require.Len(t, c.Sheds, 1)
	assert.Equal(t, ShedClosed, c.Sheds[0].Outcome)
	assert.True(t, strings.HasPrefix(c.Sheds[0].Reason, "shed session 0x1 (client 10.0.0.1:5000, 1,000 B/s, age 1m) from s1: "), c.Sheds[0].Reason)

	// Committed: max_per_minute 1 holds the next cycle.
	c = RunCycle(context.Background(), b, now.Add(2*time.Second), true)
	assert.Empty(t, c.Plan.Shed.Sheds)
	assert.Contains(t, c.Plan.Shed.Reason, "max_per_minute 1")
	assert.Equal(t, []string{"weights", "close 0x1"}, tgt.events[:2])
	assert.NotContains(t, tgt.events[2:], "close 0x1")
}

func TestRunCycleDryRunPlansShedsAndClosesNothing(t *testing.T) {
	b, _, tgt := whaleBackend(t)
	c := RunCycle(context.Background(), b, now, false)
	require.NoError(t, c.Err)
	require.Len(t, c.Plan.Shed.Sheds, 1)
	assert.True(t, strings.HasPrefix(c.Plan.Shed.Sheds[0].DryRun(), "would shed session 0x1 (client 10.0.0.1:5000, 1,000 B/s, age 1m) from s1"))
	assert.Empty(t, tgt.events, "a dry run writes and closes nothing")
	assert.Nil(t, c.Sheds)
	// The dry run counts its would-be shed against the caps, as a real run would.
	c = RunCycle(context.Background(), b, now.Add(2*time.Second), false)
	assert.Empty(t, c.Plan.Shed.Sheds)
	assert.Contains(t, c.Plan.Shed.Reason, "max_per_minute 1")
}

func TestRunCycleShedOfAnEndedSessionIsANoOp(t *testing.T) {
	b, _, tgt := whaleBackend(t)
	tgt.gone["0x1"] = true
	c := RunCycle(context.Background(), b, now, true)
	require.NoError(t, c.Err, "a session that ended meanwhile is not an error")
	assert.Equal(t, ResultOK, c.Result)
	require.Len(t, c.Sheds, 1)
	assert.Equal(t, ShedGone, c.Sheds[0].Outcome)
	// Not committed: it does not count against max_per_minute.
	c = RunCycle(context.Background(), b, now.Add(2*time.Second), false)
	assert.NotContains(t, c.Plan.Shed.Reason, "max_per_minute")
}

func TestRunCycleShedFailureIsATargetError(t *testing.T) {
	b, _, tgt := whaleBackend(t)
	tgt.fail = errors.New("socket closed")
	c := RunCycle(context.Background(), b, now, true)
	assert.Equal(t, ResultTargetError, c.Result)
	require.Error(t, c.Err)
	assert.Contains(t, c.Err.Error(), "shed session 0x1: socket closed")
	require.Len(t, c.Sheds, 1)
	assert.Equal(t, ShedFailed, c.Sheds[0].Outcome)
}

func TestRunCycleShedsNothingWhenWeightsFailOrFastSignalIsNotLive(t *testing.T) {
	b, src, tgt := whaleBackend(t)
	tgt.writeErr = errors.New("socket closed")
	c := RunCycle(context.Background(), b, now, true)
	assert.Equal(t, ResultTargetError, c.Result)
	assert.Empty(t, c.Plan.Shed.Sheds)
	assert.Contains(t, c.Plan.Shed.Reason, "1 planned not closed: the weights were not all written")
	assert.Equal(t, []string{"weights"}, tgt.events)

	b, src, tgt = whaleBackend(t)
	src.pipeline = PipelineExternal
	c = RunCycle(context.Background(), b, now, true)
	assert.Empty(t, c.Plan.Shed.Sheds)
	assert.Equal(t, "no per-session rates (fast signal dead: fast signal read failed: boom)", c.Plan.Shed.Reason)
	assert.NotContains(t, tgt.events, "close 0x1")
}

func TestRunCycleShedsNothingOnOldDataOrHold(t *testing.T) {
	b, src, tgt := whaleBackend(t)
	p := testPolicy()
	p.MaxAge = duration.Duration(10 * time.Second)
	b.Controller = mustController(t, p)
	src.age = 11 * time.Second
	c := RunCycle(context.Background(), b, now, true)
	assert.Empty(t, c.Plan.Shed.Sheds)
	assert.Contains(t, c.Plan.Shed.Reason, "old (max_age 10s)")

	b, src, tgt = whaleBackend(t)
	src.loads = map[string]float64{"s1": 680, "s2": math.NaN(), "s3": math.NaN(), "s4": math.NaN()}
	c = RunCycle(context.Background(), b, now, true)
	assert.Equal(t, ResultSkippedCoverage, c.Result)
	assert.True(t, strings.HasPrefix(c.Plan.Shed.Reason, "hold: "), c.Plan.Shed.Reason)
	assert.Empty(t, tgt.events)

	// HAProxy reset every weight the daemon wrote: while the clients
	// reconnect nothing is shed either, then the whale is.
	b, _, tgt = whaleBackend(t)
	b.Controller.Commit([]Change{{"s1", 50}, {"s2", 200}, {"s3", 200}, {"s4", 256}})
	servers := map[string]int{"s1": 1, "s2": 1, "s3": 1, "s4": 1}
	tgt.weights = servers
	c = RunCycle(context.Background(), b, now, true)
	require.True(t, c.Plan.Reset)
	require.True(t, c.Plan.Settling)
	assert.Empty(t, c.Plan.Shed.Sheds)
	assert.Equal(t, "hold: the clients are reconnecting after a reset", c.Plan.Shed.Reason)
	assert.Empty(t, tgt.events)
	c = RunCycle(context.Background(), b, now.Add(5*time.Second), true)
	require.False(t, c.Plan.Settling)
	assert.Len(t, c.Plan.Shed.Sheds, 1)
}

func TestShedSessionJSON(t *testing.T) {
	b, err := ShedSession{ID: "0x1", Serial: 7, Server: "s1", Client: "10.0.0.7:1", Age: 90 * time.Second, Rate: math.NaN()}.MarshalJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"0x1","serial":7,"server":"s1","client":"10.0.0.7:1","age_seconds":90,"rate":null}`, string(b))
}

// whaleHotOnce is whaleBackend shedding after two hot reads, after its first
// cycle: one hot read counted.
func whaleHotOnce(t *testing.T) (*Weigher, *shedSource, *closingTarget) {
	t.Helper()
	b, src, tgt := whaleBackend(t)
	sh, err := NewShedder(ShedPolicy{Above: 1.5, For: 2, MaxPerMinute: 1, MaxShare: 0.1})
	require.NoError(t, err)
	b.Shedder = sh
	src.at = now
	c := RunCycle(context.Background(), b, now, true)
	assert.Contains(t, c.Plan.Shed.Reason, "for 1 of 2 cycles")
	return b, src, tgt
}

// A fast read returned again to a later cycle (dumps spaced by the stream
// count) is not a second hot cycle.
func TestRunCycleCountsHotReadsNotCycles(t *testing.T) {
	b, src, tgt := whaleHotOnce(t)
	c := RunCycle(context.Background(), b, now.Add(2*time.Second), true)
	assert.Equal(t, "no new show sess dump since the last cycle", c.Plan.Shed.Reason)
	assert.Empty(t, c.Sheds)
	src.at = now.Add(3 * time.Second)
	c = RunCycle(context.Background(), b, now.Add(4*time.Second), true)
	require.Len(t, c.Sheds, 1, c.Plan.Shed.Reason)
	assert.Equal(t, ShedClosed, c.Sheds[0].Outcome)
	assert.Contains(t, tgt.events, "close 0x1")
}

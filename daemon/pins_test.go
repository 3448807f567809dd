package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// A backend that wants pins and finds HAProxy unreadable (a restart) tries
// again within pinRetryEvery, for pinRetryFor after its last ok cycle: its
// pins went with the old process and its clients come back in seconds. Any
// other failure, or a backend without pins, waits for its schedule.
func TestPinRetryAfterHAProxyFails(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	require.Equal(t, weighter.ResultOK, f.r.step(ctx).Result)
	failed := weighter.Cycle{Result: weighter.ResultTargetError}
	now := f.clock.Now()
	assert.True(t, f.r.pinRetry(failed, now).IsZero(), "no Pinner: the schedule")

	pn, err := weighter.NewPinner(weighter.DefaultPin())
	require.NoError(t, err)
	f.r.unit.Backend.Pinner = pn
	assert.True(t, f.r.pinRetry(failed, now).IsZero(), "a Pinner that wants no pin: the schedule")

	in := weighter.PinInput{Table: weighter.PinTable{Name: "be", Size: 100}}
	for _, s := range []string{"s1", "s2"} {
		in.Servers = append(in.Servers, weighter.PinServer{Name: s, Load: 1000, Factor: 1, Pinnable: true})
	}
	in.Clients = []weighter.Client{{Addr: "10.0.0.1", Rate: 800, Conns: 1}}
	require.NotEmpty(t, pn.Plan(now, in).Changes.Set)
	require.NotEmpty(t, pn.Wanted())

	assert.Equal(t, now.Add(pinRetryEvery), f.r.pinRetry(failed, now), "HAProxy unreadable, pins wanted: soon")
	assert.True(t, f.r.pinRetry(weighter.Cycle{Result: weighter.ResultSourceError}, now).IsZero(), "a source error: the schedule")
	assert.True(t, f.r.pinRetry(weighter.Cycle{Result: weighter.ResultOK}, now).IsZero())
	later := now.Add(pinRetryFor + time.Second)
	assert.True(t, f.r.pinRetry(failed, later).IsZero(), "down for longer than a restart: the schedule")

	// A reconnect storm's clients are placed again each cycle until they
	// are back: the next cycle comes soon, when this one was written.
	storm := weighter.Cycle{Result: weighter.ResultOK, Applied: true, Plan: weighter.Plan{Pins: &weighter.PinPlan{Storm: 3}}}
	assert.Equal(t, later.Add(pinRetryEvery), f.r.pinRetry(storm, later), "a storm placed: soon")
	storm.Result = weighter.ResultSkippedCoverage
	assert.Equal(t, later.Add(pinRetryEvery), f.r.pinRetry(storm, later), "a storm placed under the coverage guard: soon")
	storm.Applied = false
	assert.True(t, f.r.pinRetry(storm, later).IsZero(), "a dry run: the schedule")
	storm.Applied, storm.Plan.Pins.Storm = true, 0
	assert.True(t, f.r.pinRetry(storm, later).IsZero(), "every client back: the schedule")
}

// A cycle the runner ran sooner than its interval (retry) that fails again
// is the same failure: said at debug, not counted towards the run's error.
func TestRetryFailureIsNotCounted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	require.Equal(t, weighter.ResultOK, f.r.step(ctx).Result)
	f.logs.Reset()
	f.src.setErr(errors.New("connection refused"))
	f.clock.Advance(10 * time.Second)
	f.r.step(ctx) // the run's first failure: a warning
	for range 6 { // retries, each sooner than the interval
		f.r.cl.retry = true
		f.clock.Advance(pinRetryEvery)
		f.r.step(ctx)
	}
	f.r.cl.retry = false
	logs := f.logs.String()
	assert.Equal(t, 1, strings.Count(logs, `msg="cycle failed"`), logs)
	assert.NotContains(t, logs, "level=ERROR", "a restart's retries make no error")
	assert.Equal(t, 1, f.r.cl.cycles, "the retries are the first failure again")
	f.clock.Advance(10 * time.Second)
	f.r.step(ctx)
	f.clock.Advance(10 * time.Second)
	f.r.step(ctx)
	assert.Contains(t, f.logs.String(), "level=ERROR", "the third failure of the interval is an error, as before")
}

// A reconnect storm is said once at info, with its first batch; the
// batches of its later cycles (every 250 ms while the clients come back)
// are at debug.
func TestStormLoggedOnce(t *testing.T) {
	var out bytes.Buffer
	l := &cycleLog{log: slog.New(slog.NewTextHandler(&out, nil)), ready: true, fastKnown: true}
	cycle := func(p weighter.PinPlan) weighter.Cycle {
		return weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Applied: true, Plan: weighter.Plan{Pins: &p}}
	}
	set := weighter.PinChanges{Set: []weighter.Pin{{Client: "10.0.0.1", Server: "s1"}}}
	l.pins(cycle(weighter.PinPlan{Storm: 3, StormBegan: true, Projected: 1.02, Changes: set, Pins: set.Set}))
	for range 5 {
		l.pins(cycle(weighter.PinPlan{Storm: 2, Changes: set, Pins: set.Set}))
	}
	logs := out.String()
	assert.Equal(t, 1, strings.Count(logs, `msg="reconnect storm pinned"`), logs)
	assert.Contains(t, logs, "clients=3 projected_max_mean=1.02")
	assert.Equal(t, 1, strings.Count(logs, `msg="pins written"`), "the storm's later batches at debug:\n%s", logs)
	l.pins(cycle(weighter.PinPlan{Changes: set, Pins: set.Set})) // the storm over: a routine batch
	assert.Equal(t, 1, strings.Count(out.String(), `msg="pins written"`), out.String())
}

// The first batch of pins since start is said at once; later ones are
// summed in one line at most every writtenEvery (cycle time), said at the
// first cycle past it, written or not; each at debug; a reload says its
// first at once.
func TestRoutinePinWritesSummarised(t *testing.T) {
	var out bytes.Buffer
	l := &cycleLog{log: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})), ready: true, fastKnown: true}
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	cycle := func(at time.Duration, set, cleared, pinned int) weighter.Cycle {
		p := weighter.PinPlan{Pins: make([]weighter.Pin, pinned)}
		p.Changes.Set, p.Changes.Clear = make([]weighter.Pin, set), make([]string, cleared)
		return weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Applied: true, Plan: weighter.Plan{Time: t0.Add(at), Pins: &p}}
	}
	infos := func() []string {
		var got []string
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Contains(line, "level=INFO") && strings.Contains(line, `msg="pins written"`) {
				_, attrs, _ := strings.Cut(line, `msg="pins written" `)
				got = append(got, attrs)
			}
		}
		return got
	}
	l.pins(cycle(0, 6, 0, 6))
	require.Equal(t, []string{"set=6 cleared=0 pinned=6"}, infos(), "the first batch at once")
	for i := range 20 { // 40 s of batches: summed, not said
		l.pins(cycle(time.Duration(2+2*i)*time.Second, 1, i%2, 7))
	}
	l.pins(cycle(50*time.Second, 0, 0, 7)) // nothing written, not due yet
	require.Len(t, infos(), 1, out.String())
	l.pins(cycle(62*time.Second, 0, 0, 7)) // nothing written: due since the first routine batch at 2 s
	require.Equal(t, []string{"set=6 cleared=0 pinned=6", "writes=20 set=20 cleared=10 pinned=7 since=2026-12-07T10:00:02.000Z"}, infos())
	l.pins(cycle(200*time.Second, 0, 0, 7))
	require.Len(t, infos(), 2, "a quiet spell says nothing")

	l = l.clone(l.log) // a reload: its first batch at once
	l.pins(cycle(202*time.Second, 2, 1, 8))
	require.Equal(t, "set=2 cleared=1 pinned=8", infos()[2])
	assert.Equal(t, 20, strings.Count(out.String(), `level=DEBUG msg="pins written"`), "every routine batch at debug:\n%s", out.String())
}

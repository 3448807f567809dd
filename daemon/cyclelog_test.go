package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// infoLines returns the log's lines, all at info or above (the fixture's level).
func infoLines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// logAtDebug gives the fixture a new runner over the same unit that logs at
// debug, and returns its log.
func (f *fixture) logAtDebug() *strings.Builder {
	var b strings.Builder
	f.r = newRunner(f.r.unit, f.r.timing, f.clock, nil, slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})))
	return &b
}

// TestFailingSourceIsSummarised: a source that fails the same way every
// cycle is logged when it starts failing (a warning: the next cycle usually
// recovers), summarised as an error at the 3rd cycle and then every 10
// minutes, and its recovery says how long it failed.
func TestFailingSourceIsSummarised(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.r.step(ctx) // ok: ready
	f.logs.Reset()
	started := f.clock.Now()
	// The port and the duration change from one failure to the next, as a
	// real dial error's do: still one failure.
	for i := range 1000 {
		f.src.setErr(fmt.Errorf("dial tcp 10.0.0.9:%d: i/o timeout after %dms", 40000+i, 800+i%7))
		f.clock.Advance(time.Second)
		f.r.step(ctx)
	}
	lines := infoLines(f.logs.String())
	// Failed, not ready (after 3 intervals of 10 s), summaries at the 3rd
	// cycle and 10 minutes later; the next would be due at 20 minutes.
	want := []string{
		`level=WARN msg="cycle failed" backend=be result=source_error err="fetch loads: dial tcp 10.0.0.9:40000: i/o timeout after 800ms"`,
		`level=ERROR msg="still failing" backend=be result=source_error err="fetch loads: dial tcp 10.0.0.9:40002: i/o timeout after 802ms" failing_cycles=3`,
		`level=ERROR msg="still failing" backend=be result=source_error err="fetch loads: dial tcp 10.0.0.9:40602: i/o timeout after 800ms" failing_cycles=603`,
	}
	var got []string
	for _, l := range lines {
		if strings.Contains(l, "not ready") {
			continue // checked below
		}
		got = append(got, l)
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), f.logs.String())
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("line %d:\n%s\nwant it to contain\n%s", i, got[i], want[i])
		}
	}
	if !strings.Contains(got[1], "since="+started.Add(time.Second).Format("2006-01-02T15:04:05.000Z07:00")) {
		t.Errorf("summary does not say since when: %s", got[1])
	}
	if n := strings.Count(f.logs.String(), `msg="backend not ready" backend=be ready=false`); n != 1 {
		t.Errorf("%d not-ready lines, want 1:\n%s", n, f.logs.String())
	}

	// A different failure is a new line at once, the same failure again is not.
	f.logs.Reset()
	f.src.setErr(errors.New("server returned HTTP status 401 Unauthorized"))
	for range 5 {
		f.clock.Advance(time.Second)
		f.r.step(ctx)
	}
	if lines := infoLines(f.logs.String()); len(lines) != 1 || !strings.Contains(lines[0], "401 Unauthorized") ||
		!strings.Contains(lines[0], "failing_cycles=1001") {
		t.Errorf("a new message in the run: want one line, got\n%s", f.logs.String())
	}

	f.logs.Reset()
	f.src.setErr(nil)
	f.clock.Advance(time.Second)
	f.r.step(ctx)
	lines = infoLines(f.logs.String())
	if len(lines) != 1 || !strings.Contains(lines[0], `level=INFO msg="cycle ok again" backend=be after=source_error failed_for=16m45s`) ||
		!strings.Contains(lines[0], "failed_cycles=1005") || !strings.Contains(lines[0], "ready=true") {
		t.Errorf("recovery: want one line saying how long it failed and that it is ready, got\n%s", f.logs.String())
	}
}

// TestSummaryCadenceWithLongInterval: with a long interval, summaries come at
// most every 10 cycles, not every cycle once 10 minutes have passed.
func TestSummaryCadenceWithLongInterval(t *testing.T) {
	f := newFixture(t)
	f.src.setErr(errors.New("connection refused"))
	for range 100 {
		f.r.step(context.Background())
		f.clock.Advance(15 * time.Minute)
	}
	// failed, then summaries at cycles 10, 20, ..., 100.
	if n := len(infoLines(f.logs.String())); n != 11 {
		t.Errorf("%d lines in 100 cycles 15 minutes apart, want 11:\n%s", n, f.logs.String())
	}
}

// TestHoldIsLoggedOnce: a backend holding its weights (too few servers with
// data) warns once, is summarised like a failure, and says when it resumes.
func TestHoldIsLoggedOnce(t *testing.T) {
	f := newFixture(t)
	hold := &partialSource{}
	f.r.unit.Backend.Source = hold
	for range 30 {
		f.r.step(context.Background())
		f.clock.Advance(time.Second)
	}
	lines := infoLines(f.logs.String())
	if len(lines) != 2 || !strings.Contains(lines[0], `level=WARN msg="holding weights" backend=be result=skipped_coverage reason="only 1 of 2 servers have valid data (need at least 2)"`) ||
		!strings.Contains(lines[1], `level=WARN msg="still holding weights"`) || !strings.Contains(lines[1], "failing_cycles=10") {
		t.Errorf("30 held cycles: want a warning and one summary, got\n%s", f.logs.String())
	}
}

// partialSource has data for s1 only.
type partialSource struct{}

func (partialSource) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	return weighter.Loads{"s1": {{Time: time.Unix(1_800_000_000, 0), Value: 10}}}, nil
}

// TestOneLinePerCycleWithWrites: a cycle that writes many weights logs one
// line at info saying how many, the largest move and the imbalance; each
// weight is at debug.
func TestOneLinePerCycleWithWrites(t *testing.T) {
	f := newFixture(t)
	src := newNoisySource(f.clock, 50, 3)
	f.r.unit.Backend.Source, f.r.unit.Backend.Target = src, newMapTarget(src.names)
	debug := f.logAtDebug()
	f.r.step(context.Background())
	line := regexp.MustCompile(`level=INFO msg="weights written" backend=be written=(\d+) servers=50 largest="s\d{4} 100→\d+" reason=\S+ imbalance=[\d.]+ ready=true\n`)
	if m := line.FindAllStringSubmatch(debug.String(), -1); len(m) != 1 {
		t.Fatalf("want one info line for the cycle, got\n%s", debug.String())
	} else if n := strings.Count(debug.String(), `level=DEBUG msg="weight set"`); fmt.Sprint(n) != m[0][1] {
		t.Errorf("%d debug lines for %s weights written", n, m[0][1])
	}
	if n := strings.Count(debug.String(), "level=INFO"); n != 1 {
		t.Errorf("%d info lines for one cycle:\n%s", n, debug.String())
	}
}

// TestUnknownServerLoggedOnce: a series for a server the backend does not
// have is logged once, at debug, not every cycle.
func TestUnknownServerLoggedOnce(t *testing.T) {
	f := newFixture(t)
	f.r.unit.Backend.Source = extraSource{}
	debug := f.logAtDebug()
	for range 5 {
		f.r.step(context.Background())
		f.clock.Advance(time.Second)
	}
	if n := strings.Count(debug.String(), "server=s9"); n != 1 {
		t.Errorf("unknown server s9 logged %d times, want once:\n%s", n, debug.String())
	}
	if strings.Contains(debug.String(), "level=INFO msg=\"series") {
		t.Errorf("unknown server above debug:\n%s", debug.String())
	}
}

// extraSource has data for s1, s2 and s9, which the backend does not have.
type extraSource struct{}

func (extraSource) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	at := time.Unix(1_800_000_000, 0)
	return weighter.Loads{"s1": {{Time: at, Value: 10}}, "s2": {{Time: at, Value: 20}}, "s9": {{Time: at, Value: 5}}}, nil
}

// The first cycles of a backend whose fast signal has one read so far and
// whose metrics source has no point yet hold the weights and say so at
// info, once: the start of a backend, not an ERROR "cycle failed". The
// first cycle with a load says it recovered, as after any failing run.
func TestFastStartingIsNotLoggedAsAFailure(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.src.setErr(fmt.Errorf("%w, and the source: %w", weighter.ErrFastStarting,
		errors.New("prometheus: no data: query returned no series")))
	for range 3 {
		f.clock.Advance(time.Second)
		f.r.step(ctx)
	}
	f.src.setErr(nil)
	f.clock.Advance(time.Second)
	f.r.step(ctx)
	lines := infoLines(f.logs.String())
	if strings.Contains(f.logs.String(), "level=ERROR") || len(lines) != 2 ||
		!strings.Contains(lines[0], `level=INFO msg="weights held at start"`) ||
		!strings.Contains(lines[1], `msg="cycle ok again"`) {
		t.Errorf("logs:\n%s", f.logs.String())
	}
}

// A calibrating source that has given no point yet (a Prometheus that has
// not scraped the servers when the daemon starts) is waited for, said once
// at info, and its data, once the calibration knows the series' step, says
// the calibration starts: not "failing" and "back", which would say
// something broke.
func TestCalibrationWaitingForTheSourceIsSaidOnce(t *testing.T) {
	var out strings.Builder
	l := &cycleLog{log: slog.New(slog.NewTextHandler(&out, nil)), ready: true, fastKnown: true}
	now := time.Unix(1_800_000_000, 0)
	live := func(age time.Duration, err string, step time.Duration) *weighter.Signal {
		return &weighter.Signal{Pipeline: weighter.PipelineCalibrated, Fast: weighter.FastLive, Calibrate: true,
			ExternalFetched: true, ExternalAge: age, ExternalError: err, Window: step}
	}
	for i, sig := range []*weighter.Signal{live(-1, "prometheus: no data", 0), live(-1, "prometheus: no data", 0),
		live(-1, "", 0), live(15*time.Second, "", 0), live(15*time.Second, "", 15*time.Second), live(15*time.Second, "", 15*time.Second)} {
		l.cycle(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Plan: weighter.Plan{Time: now}, Signal: sig}, now, true)
		if i == 3 && strings.Contains(out.String(), "calibration starts") {
			// One point: the series' step, and so the calibration, is not known yet.
			t.Errorf("calibration said to start before the step is known:\n%s", out.String())
		}
	}
	lines := infoLines(out.String())
	if len(lines) != 2 ||
		!strings.Contains(lines[0], `msg="calibration waiting for the source"`) ||
		!strings.Contains(lines[1], `msg="calibration starts"`) {
		t.Errorf("logs:\n%s", out.String())
	}
}

// TestRareArrivalsSaidOnce: the run bound's rare-arrivals mode is said once
// when it starts and once when it ends, not every cycle; a held cycle does
// not end it.
func TestRareArrivalsSaidOnce(t *testing.T) {
	var out strings.Builder
	l := &cycleLog{log: slog.New(slog.NewTextHandler(&out, nil)), ready: true, fastKnown: true}
	now := time.Unix(1_800_000_000, 0)
	for _, p := range []weighter.Plan{{}, {RareArrivals: true}, {RareArrivals: true}, {Hold: true}, {RareArrivals: true}, {}, {}} {
		p.Time = now
		l.cycle(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Plan: p}, now, true)
	}
	lines := infoLines(out.String())
	if len(lines) != 2 ||
		!strings.Contains(lines[0], `msg="new connections rare" rare_arrivals=true`) ||
		!strings.Contains(lines[1], `msg="new connections frequent again" rare_arrivals=false`) {
		t.Errorf("logs:\n%s", out.String())
	}
}

// move is one server's weight in a synthetic cycle: from → to, with the
// plan's reason; a server whose weight stays is not written.
type move struct {
	server   string
	from, to int
	reason   string
}

// writeCycle is an ok cycle at at that wrote the moves that change a weight.
func writeCycle(at time.Time, moves ...move) weighter.Cycle {
	c := weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Applied: true,
		Plan: weighter.Plan{Backend: "be", Time: at, Imbalance: 1.234}}
	for i, m := range moves {
		c.Plan.Servers = append(c.Plan.Servers, weighter.ServerPlan{Server: m.server, Load: 10, Current: m.from, New: m.to, Reason: m.reason})
		c.Servers = append(c.Servers, weighter.ServerState{Name: m.server, Weight: m.from, Sessions: 7 + i})
		if m.from != m.to {
			c.Plan.Servers[i].Action = weighter.ActionSet
			c.Written = append(c.Written, weighter.Change{Server: m.server, Weight: m.to})
		}
	}
	return c
}

// routineCycle writes s1..s3 up by 1 % to 10 % (s4 stays): re-weighting as
// the fast signal makes it nearly every cycle.
func routineCycle(at time.Time, i int) weighter.Cycle {
	return writeCycle(at, move{"s1", 100, 101 + i%10, "rebalance"}, move{"s2", 100, 99 - i%5, "rebalance"},
		move{"s3", 50, 51, "rebalance"}, move{"s4", 100, 100, ""})
}

// newWriteLog is a cycleLog at info (or debug) of a ready backend whose fast
// signal is known, as after its first cycles, with its output.
func newWriteLog(level slog.Level) (*cycleLog, *strings.Builder) {
	var out strings.Builder
	return &cycleLog{log: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: level})), ready: true, fastKnown: true}, &out
}

// writtenLines returns the INFO lines of a log that say weights were
// written: "weights written", or another message of the same cycle that
// carries the write (a reset's).
func writtenLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `level=INFO msg="weights written"`) || strings.Contains(l, " written=") {
			out = append(out, l)
		}
	}
	return out
}

// With the default 2 s interval and the fast signal, nearly every cycle
// writes: 300 cycles (10 minutes) used to log 300 "weights written" lines.
// Now the first is logged at once and the rest summarised once a minute:
// each summary counts the 31 cycles (93 weights) since the previous one.
func TestRoutineWritesSummarisedEveryMinute(t *testing.T) {
	l, out := newWriteLog(slog.LevelInfo)
	start := time.Unix(1_800_000_000, 0).UTC()
	for i := range 300 {
		at := start.Add(time.Duration(i) * 2 * time.Second)
		l.cycle(routineCycle(at, i), at, true)
	}
	lines := writtenLines(out.String())
	t.Logf("300 cycles 2 s apart, each writing: %d INFO lines", len(lines))
	require.Len(t, lines, 10, out.String())
	assert.Len(t, infoLines(out.String()), 10, "only weights written lines:\n%s", out.String())
	assert.Contains(t, lines[0], `msg="weights written" written=3 servers=4 largest="s3 50→51" reason=rebalance imbalance=1.23`)
	for k, line := range lines[1:] {
		since := start.Add(time.Duration(2+62*k) * time.Second).Format("2006-01-02T15:04:05.000Z07:00")
		assert.Contains(t, line, `msg="weights written" writes=31 changes=93 largest="s1 100→110" reason=rebalance imbalance=1.23 since=`+since, "summary %d", k+1)
	}
}

// The summary reports the largest move of its whole period, not its last
// cycle's, with that move's reason; weights the cycles did not change are
// not counted.
func TestSummaryReportsTheLargestMoveOfThePeriod(t *testing.T) {
	l, out := newWriteLog(slog.LevelInfo)
	start := time.Unix(1_800_000_000, 0)
	l.cycle(routineCycle(start, 0), start, true) // the first write, at once
	for i := 1; i <= 30; i++ {
		at := start.Add(time.Duration(i) * 2 * time.Second)
		c := writeCycle(at, move{"s1", 100, 102, "rebalance"}, move{"s2", 100, 100, ""})
		if i == 10 {
			c = writeCycle(at, move{"s1", 100, 102, "rebalance"}, move{"s2", 40, 160, "fast 2 kB/s"})
		}
		l.cycle(c, at, true)
	}
	assert.Len(t, writtenLines(out.String()), 1, "no summary before a minute:\n%s", out.String())
	at := start.Add(62 * time.Second)
	l.cycle(writeCycle(at, move{"s1", 100, 90, "rebalance"}), at, true)
	lines := writtenLines(out.String())
	require.Len(t, lines, 2, out.String())
	assert.Contains(t, lines[1], `writes=31 changes=32 largest="s2 40→160" reason="fast 2 kB/s"`)
}

// A drain (to 0) and an undrain (from 0) are logged at once, in the middle of
// a summary's period, and are not counted again in the summary.
func TestDrainAndUndrainAreLoggedAtOnce(t *testing.T) {
	l, out := newWriteLog(slog.LevelInfo)
	start := time.Unix(1_800_000_000, 0)
	step := func(i int, c weighter.Cycle) { l.cycle(c, start.Add(time.Duration(i)*2*time.Second), true) }
	at := func(i int) time.Time { return start.Add(time.Duration(i) * 2 * time.Second) }
	step(0, routineCycle(at(0), 0))
	step(1, routineCycle(at(1), 1))
	step(2, writeCycle(at(2), move{"s1", 100, 120, "rebalance"}, move{"s3", 80, 0, "drain"}))
	lines := writtenLines(out.String())
	require.Len(t, lines, 2, out.String())
	assert.Contains(t, lines[1], `written=2 servers=2 largest="s3 80→0" reason=drain drained=1 imbalance=1.23`)
	step(3, writeCycle(at(3), move{"s3", 0, 64, "undrain"}))
	lines = writtenLines(out.String())
	require.Len(t, lines, 3, out.String())
	assert.Contains(t, lines[2], `written=1 servers=1 largest="s3 0→64" reason=undrain undrained=1`)
	for i := 4; i <= 31; i++ {
		step(i, routineCycle(at(i), i))
	}
	lines = writtenLines(out.String())
	require.Len(t, lines, 4, out.String())
	// cycles 1 and 4..31: the drain and undrain were said already.
	assert.Contains(t, lines[3], `writes=29 changes=87 largest="s1 100→110"`)
}

// The first write after a start, after a reload (a clone of the log), after
// a failing run and of a plan from HAProxy's reset weights is logged at once.
func TestNotableWritesAreLoggedAtOnce(t *testing.T) {
	l, out := newWriteLog(slog.LevelInfo)
	now := time.Unix(1_800_000_000, 0)
	next := func() time.Time { now = now.Add(2 * time.Second); return now }
	lines := func() int { return len(writtenLines(out.String())) }

	l.cycle(routineCycle(next(), 0), now, true)
	assert.Equal(t, 1, lines(), "the first write:\n%s", out.String())
	l.cycle(routineCycle(next(), 1), now, true)
	assert.Equal(t, 1, lines(), "a routine write:\n%s", out.String())

	l = l.clone(l.log)
	l.cycle(routineCycle(next(), 2), now, true)
	assert.Equal(t, 2, lines(), "the first write after a reload:\n%s", out.String())

	for range 3 {
		n := next()
		l.cycle(weighter.Cycle{Backend: "be", Result: weighter.ResultSourceError, Err: errors.New("connection refused"),
			Plan: weighter.Plan{Time: n}}, n, true)
	}
	l.cycle(writeCycle(next(), move{"s1", 100, 100, ""}), now, true) // ok again, nothing written
	l.cycle(routineCycle(next(), 3), now, true)
	assert.Equal(t, 3, lines(), "the first write after a failing run:\n%s", out.String())
	l.cycle(routineCycle(next(), 4), now, true)
	assert.Equal(t, 3, lines(), "a routine write:\n%s", out.String())

	reset := routineCycle(next(), 5)
	reset.Plan.Reset = true
	l.cycle(reset, now, true)
	require.Equal(t, 4, lines(), out.String())
	assert.Contains(t, writtenLines(out.String())[3], "written=3", "the reset's write is on the reset's line")
	assert.Contains(t, out.String(), `msg="HAProxy reset the weights"`)
}

// Routine writes are summarised even when the backend stops writing: the
// first cycle a minute after the first of them says them, written or not;
// after that, cycles without writes say nothing.
func TestSummaryWithoutAFurtherWrite(t *testing.T) {
	l, out := newWriteLog(slog.LevelInfo)
	start := time.Unix(1_800_000_000, 0)
	at := func(i int) time.Time { return start.Add(time.Duration(i) * 2 * time.Second) }
	l.cycle(routineCycle(at(0), 0), at(0), true)
	l.cycle(routineCycle(at(1), 1), at(1), true)
	for i := 2; i < 300; i++ {
		l.cycle(writeCycle(at(i), move{"s1", 100, 100, ""}), at(i), true)
	}
	lines := writtenLines(out.String())
	require.Len(t, lines, 2, out.String())
	assert.Contains(t, lines[1], `writes=1 changes=3`)
	assert.Contains(t, lines[1], "since="+at(1).Format("2006-01-02T15:04:05.000Z07:00"))
}

// Each weight set is at debug with the server's open connections (HAProxy's
// scur, as the cycle read the servers).
func TestWeightSetDebugHasSessions(t *testing.T) {
	l, out := newWriteLog(slog.LevelDebug)
	now := time.Unix(1_800_000_000, 0)
	l.cycle(writeCycle(now, move{"s1", 100, 120, "rebalance"}, move{"s2", 100, 100, ""}, move{"s3", 50, 40, "rebalance"}), now, true)
	assert.Contains(t, out.String(), `level=DEBUG msg="weight set" server=s1 from=100 to=120 load=10 sessions=7 reason=rebalance`)
	assert.Contains(t, out.String(), `level=DEBUG msg="weight set" server=s3 from=50 to=40 load=10 sessions=9 reason=rebalance`)
	assert.Equal(t, 2, strings.Count(out.String(), `msg="weight set"`), out.String())
}

// The runner at the default policy and 2 s, 50 servers with noisy loads (every
// cycle writes): 300 cycles log about 10 INFO lines, not 300.
func TestLogVolumeAtTwoSeconds(t *testing.T) {
	clock := testenv.NewClock()
	lines, size := logVolume(t, newNoisySource(clock, 50, 4), clock, 2*time.Second, 300)
	t.Logf("50 servers, noisy loads, interval 2s, 300 cycles: %d lines, %d bytes", lines, size)
	assert.LessOrEqual(t, lines, 12)
	assert.GreaterOrEqual(t, lines, 10, "the first write and a summary a minute")
}

// TestResetSettleSaidOnce: a reset is said once, the cycles that keep the
// configured weights while the clients reconnect say nothing, and the cycle
// that weights again says so, with how long it took and what it wrote.
func TestResetSettleSaidOnce(t *testing.T) {
	var out strings.Builder
	l := &cycleLog{log: slog.New(slog.NewTextHandler(&out, nil)), ready: true, fastKnown: true, wroteOnce: true}
	start := time.Unix(1_800_000_000, 0)
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	l.cycle(routineCycle(at(0), 1), at(0), true) // routine: summarised later
	for k, p := range []weighter.Plan{{Reset: true, Settling: true}, {Settling: true}, {Hold: true}, {Settling: true}} {
		p.Time = at(2 + 2*k)
		l.cycle(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Plan: p}, p.Time, true)
	}
	settled := writeCycle(at(10), move{"s1", 1, 200, "rebalance"}, move{"s2", 1, 100, "rebalance"})
	l.cycle(settled, at(10), true)
	l.cycle(routineCycle(at(12), 2), at(12), true) // routine again
	lines := infoLines(out.String())
	require.Len(t, lines, 2, out.String())
	assert.Contains(t, lines[0], `msg="HAProxy reset the weights" reset=true`)
	assert.Contains(t, lines[1], `msg="clients reconnected after the reset" settled_after=8s written=2 servers=2 largest="s1 1→200"`)
}

// TestOneFailedCycleIsAWarning: a cycle that fails once and recovers at the
// next (a socket dial that timed out on a loaded host at start) is a
// warning and an info line, never an error; a third failing cycle in a row is.
func TestOneFailedCycleIsAWarning(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.r.step(ctx)
	f.logs.Reset()
	for range 3 { // fail once, recover: three times over
		f.src.setErr(errors.New("dial unix /run/haproxy/admin.sock: i/o timeout"))
		f.clock.Advance(time.Second)
		f.r.step(ctx)
		f.src.setErr(nil)
		f.clock.Advance(time.Second)
		f.r.step(ctx)
	}
	assert.NotContains(t, f.logs.String(), "level=ERROR", "one failed cycle at a time is not an error")
	assert.Equal(t, 3, strings.Count(f.logs.String(), `level=WARN msg="cycle failed"`), f.logs.String())

	f.src.setErr(errors.New("connection refused"))
	for range 3 {
		f.clock.Advance(time.Second)
		f.r.step(ctx)
	}
	assert.Equal(t, 1, strings.Count(f.logs.String(), `level=ERROR msg="still failing"`), f.logs.String())
}

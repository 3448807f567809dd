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
// cycle is logged when it starts failing, summarised at the 10th cycle and
// then every 10 minutes, and its recovery says how long it failed.
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
	// Failed, not ready (after 3 intervals of 10 s), summaries at the 10th
	// cycle and 10 minutes later; the next would be due at 20 minutes.
	want := []string{
		`level=ERROR msg="cycle failed" backend=be result=source_error err="fetch loads: dial tcp 10.0.0.9:40000: i/o timeout after 800ms"`,
		`level=ERROR msg="still failing" backend=be result=source_error err="fetch loads: dial tcp 10.0.0.9:40009: i/o timeout after 802ms" failing_cycles=10`,
		`level=ERROR msg="still failing" backend=be result=source_error err="fetch loads: dial tcp 10.0.0.9:40609: i/o timeout after 800ms" failing_cycles=610`,
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
	if n := strings.Count(f.logs.String(), `msg="backend not ready: no ok cycle within its readiness window" backend=be ready=false`); n != 1 {
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
		!strings.Contains(lines[0], `level=INFO msg="weights held until the fast signal has a rate (one read so far) or the source has data"`) ||
		!strings.Contains(lines[1], `msg="cycle ok again"`) {
		t.Errorf("logs:\n%s", f.logs.String())
	}
}

// A calibrating source that has given no point yet (a Prometheus that has
// not scraped the servers when the daemon starts) is waited for, said once
// at info, and its first data says the calibration starts: not "failing"
// and "back", which would say something broke.
func TestCalibrationWaitingForTheSourceIsSaidOnce(t *testing.T) {
	var out strings.Builder
	l := &cycleLog{log: slog.New(slog.NewTextHandler(&out, nil)), ready: true, fastKnown: true}
	now := time.Unix(1_800_000_000, 0)
	live := func(age time.Duration, err string) *weighter.Signal {
		return &weighter.Signal{Pipeline: weighter.PipelineCalibrated, Fast: weighter.FastLive, Calibrate: true,
			ExternalFetched: true, ExternalAge: age, ExternalError: err}
	}
	for _, sig := range []*weighter.Signal{live(-1, "prometheus: no data"), live(-1, "prometheus: no data"),
		live(-1, ""), live(15*time.Second, ""), live(15*time.Second, "")} {
		l.cycle(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Plan: weighter.Plan{Time: now}, Signal: sig}, now, true)
	}
	lines := infoLines(out.String())
	if len(lines) != 2 ||
		!strings.Contains(lines[0], `msg="calibration waiting for the source's first data; weighting by the fast signal alone"`) ||
		!strings.Contains(lines[1], `msg="calibrating source has data; calibration starts"`) {
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
		!strings.Contains(lines[0], `msg="new connections are rare: the run bound spreads a burst over run_rare_spread servers" rare_arrivals=true`) ||
		!strings.Contains(lines[1], `msg="new connections are frequent again: the run bound is the lower median's" rare_arrivals=false`) {
		t.Errorf("logs:\n%s", out.String())
	}
}

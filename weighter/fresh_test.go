package weighter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeLocal is a backend whose servers carry constant byte rates through this
// balancer, read at the fake clock's time, as haproxy's reader reports them.
type fakeLocal struct {
	clock    *time.Time
	rate     map[string]float64 // bytes/s per server
	sessions map[string]float64
	total    map[string]float64
	last     time.Time
	err      error // the next reads fail with it
	frozen   bool  // bytes stop moving (sessions stay open)
	still    int
	unread   map[string]string // servers the reader cannot read, with why
}

func (f *fakeLocal) ReadLocal(context.Context, []ServerState) (LocalRead, error) {
	if f.err != nil {
		return LocalRead{}, f.err
	}
	now := *f.clock
	if f.total == nil {
		f.total = map[string]float64{}
	}
	out := LocalRead{At: now, Since: f.last, Servers: map[string]LocalCounter{}, Streams: 7}
	for name, r := range f.rate {
		if f.frozen {
			r = 0
		}
		if !f.last.IsZero() {
			f.total[name] += r * now.Sub(f.last).Seconds()
		}
		out.Servers[name] = LocalCounter{Bytes: f.total[name], Rate: r, Sessions: f.sessions[name], Reset: f.last.IsZero()}
		if why, ok := f.unread[name]; ok {
			out.Servers[name] = LocalCounter{Bytes: f.total[name], Reset: f.last.IsZero(), Unread: why}
		}
	}
	if f.frozen {
		f.still++
		if f.still >= 3 {
			out.Dead = fmt.Errorf("local signal dead: no byte moved in %d reads", f.still)
		}
	} else {
		f.still = 0
	}
	f.last = now
	return out, nil
}

// fakeExternal answers the servers' true load (cost × local rate) at the fake
// clock's time, or fails.
type fakeExternal struct {
	clock *time.Time
	loads map[string]float64
	err   error
	calls int
}

func (f *fakeExternal) Fetch(context.Context, []ServerState) (Loads, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	out := Loads{}
	for name, v := range f.loads {
		out[name] = Series{{Time: *f.clock, Value: v}}
	}
	return out, nil
}

type freshRig struct {
	now   time.Time
	local *fakeLocal
	ext   *fakeExternal
	src   *Fresh
}

func newFreshRig(t *testing.T, calibrate bool) *freshRig {
	t.Helper()
	r := &freshRig{now: t0}
	r.local = &fakeLocal{clock: &r.now, rate: map[string]float64{"s1": 100, "s2": 100, "s3": 100},
		sessions: map[string]float64{"s1": 2, "s2": 2, "s3": 2}}
	// s2 costs twice as much per byte as the others.
	r.ext = &fakeExternal{clock: &r.now, loads: map[string]float64{"s1": 100, "s2": 200, "s3": 100}}
	src, err := NewFresh(FreshConfig{Fast: r.local, External: r.ext, Calibrate: calibrate,
		Calibration: DefaultCalibration(30 * time.Second), Refresh: 15 * time.Second,
		Now: func() time.Time { return r.now }})
	require.NoError(t, err)
	r.src = src
	return r
}

// step advances the clock by 2 s and runs one fetch.
func (r *freshRig) step(t *testing.T) (Loads, *Signal, error) {
	t.Helper()
	r.now = r.now.Add(2 * time.Second)
	return r.src.FetchSignal(context.Background(), nil)
}

// run steps for d and returns the last fetch.
func (r *freshRig) run(t *testing.T, d time.Duration) (Loads, *Signal, error) {
	t.Helper()
	var (
		l   Loads
		s   *Signal
		err error
	)
	for end := r.now.Add(d); r.now.Before(end); {
		l, s, err = r.step(t)
	}
	return l, s, err
}

func TestFreshCalibratesTheFastSignal(t *testing.T) {
	r := newFreshRig(t, true)
	_, sig, err := r.step(t)
	require.NoError(t, err)
	assert.Equal(t, FastStarting, sig.Fast)
	assert.Equal(t, PipelineExternal, sig.Pipeline, "one read: the external loads stand in")

	l, sig, err := r.run(t, 3*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, FastLive, sig.Fast)
	assert.Equal(t, PipelineCalibrated, sig.Pipeline)
	assert.Zero(t, sig.Uncalibrated)
	assert.Equal(t, 7, sig.Streams)
	// factors 0.75, 1.5, 0.75 (mean 1); load = factor × 100 B/s / 2 sessions
	assert.InDelta(t, 0.75*50, l["s1"][0].Value, 1e-6)
	assert.InDelta(t, 1.5*50, l["s2"][0].Value, 1e-6)
	assert.InDelta(t, 1.5, sig.Servers["s2"].Factor, 1e-9)
	assert.Contains(t, sig.Servers["s2"].Note, "× calibration 1.5")
	assert.GreaterOrEqual(t, sig.ExternalAge, time.Duration(0))
	// The external source is asked every 15 s, not every cycle.
	assert.InDelta(t, 3*60/15, r.ext.calls, 2)
}

// External down → the calibration is held, then expires (fast alone, with a
// reason), and comes back with the source; the cycle never fails meanwhile.
func TestFreshExternalDownThenBack(t *testing.T) {
	r := newFreshRig(t, true)
	_, _, err := r.run(t, 3*time.Minute)
	require.NoError(t, err)

	r.ext.err = errors.New("prometheus: connection refused")
	l, sig, err := r.run(t, 5*time.Minute)
	require.NoError(t, err, "the fast signal carries the weights")
	assert.Equal(t, PipelineCalibrated, sig.Pipeline)
	assert.InDelta(t, 1.5*50, l["s2"][0].Value, 1e-6, "held within hold")
	calls := r.ext.calls
	_, sig, _ = r.run(t, 30*time.Second)
	assert.LessOrEqual(t, r.ext.calls-calls, 2, "a failing source is asked every refresh, not every cycle")
	_ = sig

	l, sig, err = r.run(t, 6*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 3, sig.Uncalibrated)
	assert.InDelta(t, 50, l["s2"][0].Value, 1e-6, "expired: fast alone")
	assert.Contains(t, sig.Servers["s2"].Note, "calibration expired")
	assert.Contains(t, sig.Servers["s2"].Note, "fast signal alone")
	assert.Equal(t, []string{"s1", "s2", "s3"}, sig.Expired, "expired is a state, not only a note's words")
	assert.Greater(t, sig.ExternalAge, 10*time.Minute)

	r.ext.err = nil
	l, sig, err = r.run(t, time.Minute)
	require.NoError(t, err)
	assert.Zero(t, sig.Uncalibrated)
	assert.Empty(t, sig.Expired)
	assert.Greater(t, l["s2"][0].Value, 1.2*l["s1"][0].Value, "calibrated again")
}

// Fast dead (read fails, or nothing moves under open sessions) → external
// alone, and back to the fast signal when it moves again.
func TestFreshFastDeadThenBack(t *testing.T) {
	r := newFreshRig(t, true)
	_, _, err := r.run(t, time.Minute)
	require.NoError(t, err)

	r.local.err = errors.New("show sess all: permission denied")
	l, sig, err := r.step(t)
	require.NoError(t, err)
	assert.Equal(t, FastDead, sig.Fast)
	assert.Contains(t, sig.FastReason, "permission denied")
	assert.Equal(t, PipelineExternal, sig.Pipeline)
	assert.Equal(t, 200.0, l["s2"][0].Value, "the external loads as they are")

	// Both down: the cycle fails, naming both.
	r.ext.err = errors.New("prometheus down")
	_, _, err = r.step(t)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "prometheus down")
	assert.Contains(t, err.Error(), "permission denied")
	r.ext.err = nil

	r.local.err = nil
	_, sig, err = r.step(t)
	require.NoError(t, err)
	assert.Equal(t, FastLive, sig.Fast, "a good read after a failure gives a rate")

	r.local.frozen = true
	for range 2 {
		_, sig, _ = r.step(t)
		assert.Equal(t, FastLive, sig.Fast, "a pause shorter than DeadAfter reads keeps it live")
	}
	_, sig, _ = r.step(t)
	assert.Equal(t, FastDead, sig.Fast)
	assert.Contains(t, sig.FastReason, "no byte moved in 3 reads")
	assert.Equal(t, PipelineExternal, sig.Pipeline)

	r.local.frozen = false
	l, sig, err = r.step(t)
	require.NoError(t, err)
	assert.Equal(t, FastLive, sig.Fast)
	assert.Equal(t, PipelineCalibrated, sig.Pipeline)
	assert.Less(t, l["s2"][0].Value, 200.0)
}

// TestFreshUnreadServersAreMissing: a server the fast reader could not
// read has no fast load (the policy keeps its share) while the others
// weigh, and the Signal says why; when it can read none of them, the fast
// signal is dead and the source weighs alone.
func TestFreshUnreadServersAreMissing(t *testing.T) {
	r := newFreshRig(t, true)
	r.local.unread = map[string]string{"s2": "no IP address the socket table can show"}
	_, _, _ = r.step(t)
	l, sig, err := r.step(t)
	require.NoError(t, err)
	assert.Equal(t, FastLive, sig.Fast)
	assert.NotEqual(t, PipelineExternal, sig.Pipeline)
	assert.NotContains(t, l, "s2", "an unread server has a fast load")
	assert.Contains(t, l, "s1")
	assert.Equal(t, map[string]string{"s2": "no IP address the socket table can show"}, sig.Unread)
	assert.NotContains(t, sig.Servers, "s2")

	r.local.unread = map[string]string{"s1": "x", "s2": "no IP address the socket table can show", "s3": "x"}
	l, sig, err = r.step(t)
	require.NoError(t, err)
	assert.Equal(t, FastDead, sig.Fast)
	assert.Equal(t, "the fast signal could read none of the 3 servers (s1: x)", sig.FastReason)
	assert.Equal(t, PipelineExternal, sig.Pipeline)
	assert.Contains(t, l, "s2", "the source weighs alone")
}

func TestFreshIdleUsesTheExternalSource(t *testing.T) {
	r := newFreshRig(t, true)
	r.local.rate = map[string]float64{"s1": 0, "s2": 0, "s3": 0}
	r.local.sessions = nil
	_, _, _ = r.step(t)
	l, sig, err := r.step(t)
	require.NoError(t, err)
	assert.Equal(t, FastIdle, sig.Fast)
	assert.Equal(t, PipelineExternal, sig.Pipeline)
	assert.Equal(t, 100.0, l["s1"][0].Value)
}

// Without calibration (source: haproxy) the external source is only the
// fallback: not asked while the fast signal is live.
func TestFreshFastAlone(t *testing.T) {
	r := newFreshRig(t, false)
	l, sig, err := r.run(t, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, PipelineFast, sig.Pipeline)
	assert.Equal(t, 50.0, l["s2"][0].Value)
	assert.Equal(t, 1, r.ext.calls, "asked once, while the fast signal was starting")
	assert.NotContains(t, sig.Servers["s1"].Note, "calibration")
}

// once: a fetch with no earlier read waits FirstWait and reads again.
func TestFreshFirstWait(t *testing.T) {
	r := newFreshRig(t, false)
	r.src.cfg.FirstWait = 2 * time.Second
	var slept time.Duration
	r.src.cfg.Sleep = func(_ context.Context, d time.Duration) error {
		slept += d
		r.now = r.now.Add(d)
		return nil
	}
	l, sig, err := r.src.FetchSignal(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, slept)
	assert.Equal(t, FastLive, sig.Fast)
	assert.Equal(t, 50.0, l["s1"][0].Value)
}

// Graphite: the window is the series' step, and points move to their bucket's end.
func TestFreshStepWindow(t *testing.T) {
	r := newFreshRig(t, true)
	r.src.cfg.StepWindow = true
	r.src.cal, r.src.calWindow = nil, 0
	ext := &stepExternal{clock: &r.now, loads: r.ext.loads, step: 10 * time.Second}
	r.src.cfg.External = ext
	l, sig, err := r.run(t, 3*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, sig.Window)
	assert.Zero(t, sig.Uncalibrated)
	assert.InDelta(t, 1.5*50, l["s2"][0].Value, 1e-6)
}

// stepExternal answers a Graphite-like series: points every step, stamped at
// their bucket's start, the last complete bucket included.
type stepExternal struct {
	clock *time.Time
	loads map[string]float64
	step  time.Duration
}

func (f *stepExternal) Fetch(context.Context, []ServerState) (Loads, error) {
	out := Loads{}
	end := f.clock.Truncate(f.step)
	for name, v := range f.loads {
		var s Series
		for ts := end.Add(-6 * f.step); ts.Before(end); ts = ts.Add(f.step) {
			s = append(s, Point{Time: ts, Value: v})
		}
		out[name] = s
	}
	return out, nil
}

// Whatever the fast reads hold, the combined loads are finite and not negative.
func TestCombineFastNeverInvalid(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []float64{0, 1, 1e300, math.MaxFloat64, -1, math.NaN(), math.Inf(1), math.Inf(-1), 5e-324}
	pick := func() float64 {
		if rng.IntN(3) == 0 {
			return vals[rng.IntN(len(vals))]
		}
		return rng.Float64() * 1e6
	}
	for i := range 20000 {
		r := LocalRead{At: t0, Servers: map[string]LocalCounter{}}
		cal := map[string]Calibration{}
		for _, n := range []string{"a", "b", "c"} {
			r.Servers[n] = LocalCounter{Bytes: pick(), Rate: pick(), Sessions: pick(), Reset: rng.IntN(5) == 0,
				FreshRate: pick(), FreshSessions: pick()}
			if rng.IntN(5) == 0 {
				c := r.Servers[n]
				c.Unread = "cannot be seen"
				r.Servers[n] = c
			}
			if rng.IntN(2) == 0 {
				cal[n] = Calibration{Factor: math.Abs(pick()), Calibrated: true}
			}
		}
		loads, inputs := CombineFast(r, cal)
		for n, ser := range loads {
			v := ser[0].Value
			require.False(t, math.IsNaN(v) || math.IsInf(v, 0) || v < 0, "case %d %s: %v", i, n, v)
			require.Contains(t, inputs, n)
			require.False(t, r.Servers[n].Reset, "a reset server has no rate")
			require.Empty(t, r.Servers[n].Unread, "an unread server has no load")
		}
	}
}

// The calibrated loads of the Fresh source are never NaN, infinite or
// negative, whatever the external source answers.
func TestFreshLoadsNeverInvalid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	r := newFreshRig(t, true)
	bad := []float64{math.NaN(), math.Inf(1), -5, 0, 1e308}
	for i := range 1500 {
		for n := range r.ext.loads {
			if rng.IntN(4) == 0 {
				r.ext.loads[n] = bad[rng.IntN(len(bad))]
			} else {
				r.ext.loads[n] = rng.Float64() * 1000
			}
			r.local.rate[n] = rng.Float64() * 1000
			r.local.sessions[n] = float64(rng.IntN(5))
		}
		l, _, err := r.step(t)
		require.NoError(t, err)
		for n, ser := range l {
			for _, p := range ser {
				if r.src.state == FastLive {
					require.False(t, math.IsNaN(p.Value) || math.IsInf(p.Value, 0) || p.Value < 0, "step %d %s: %v", i, n, p.Value)
				}
			}
		}
	}
}

// RunCycle keeps the Signal and the plan's reasons say what the loads were.
func TestRunCycleKeepsTheSignal(t *testing.T) {
	r := newFreshRig(t, true)
	_, _, err := r.run(t, 3*time.Minute)
	require.NoError(t, err)
	r.now = r.now.Add(2 * time.Second)
	b := &Weigher{Name: "be", Source: r.src, Target: &staticTarget{servers: up(100, 100, 100)},
		Controller: mustController(t, DefaultPolicy())}
	c := RunCycle(context.Background(), b, r.now, false)
	require.NoError(t, c.Err)
	require.NotNil(t, c.Signal)
	assert.Equal(t, PipelineCalibrated, c.Signal.Pipeline)
	for _, s := range c.Plan.Servers {
		assert.True(t, strings.Contains(s.Reason, "fast ") && strings.Contains(s.Reason, "calibration"), s.Reason)
	}

	r.local.err = errors.New("dump failed")
	r.now = r.now.Add(2 * time.Second)
	c = RunCycle(context.Background(), b, r.now, false)
	require.NoError(t, c.Err)
	for _, s := range c.Plan.Servers {
		assert.Contains(t, s.Reason, "external source alone (fast signal dead)")
	}
}

type staticTarget struct{ servers []ServerState }

func (s *staticTarget) Servers(context.Context) ([]ServerState, error) { return s.servers, nil }
func (s *staticTarget) SetWeights(context.Context, []Change) error     { return nil }

// A calibrating source whose series name no server says so while the fast
// signal weighs (the cycle itself is fine).
func TestFreshSaysWhenTheSourceNamesNoServer(t *testing.T) {
	r := newFreshRig(t, true)
	r.ext.loads = map[string]float64{"web-1:9100": 1, "web-2:9100": 2}
	_, _, _ = r.step(t)
	r.now = r.now.Add(20 * time.Second)
	_, sig, err := r.src.FetchSignal(context.Background(), up(1, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, PipelineCalibrated, sig.Pipeline)
	assert.Contains(t, sig.ExternalError, "no series name matches a server of the backend")
}

// A source that answers only null points (Graphite's buckets up to now once
// the metric stopped, a NaN from Prometheus) has no new data: the external
// age grows while the calibration expires. Before, the null points' times
// counted and the age stayed near 0 while every server was uncalibrated.
func TestFreshExternalAgeIgnoresNullPoints(t *testing.T) {
	r := newFreshRig(t, true)
	_, _, err := r.run(t, 3*time.Minute)
	require.NoError(t, err)
	for name := range r.ext.loads {
		r.ext.loads[name] = math.NaN()
	}
	_, sig, err := r.run(t, 11*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 3, sig.Uncalibrated)
	assert.Greater(t, sig.ExternalAge, 10*time.Minute)
}

// At start the fast signal has one read (no rate yet) and a metrics source
// with no point for the query yet fails: there is no load at all, which the
// error says with ErrFastStarting (the daemon logs it as the start it is,
// not as a failure). Once the fast signal has a rate it weighs alone, the
// source's failure noted in the signal, with no external point read so far
// (ExternalAge -1) and no calibration expired (there never was one).
func TestFreshStartingWithoutExternalData(t *testing.T) {
	r := newFreshRig(t, true)
	noData := errors.New("prometheus: no data: query returned no series")
	r.ext.err = noData
	_, sig, err := r.src.FetchSignal(context.Background(), nil) // the first read: no rate yet
	require.ErrorIs(t, err, ErrFastStarting)
	require.ErrorIs(t, err, noData)
	assert.Equal(t, FastStarting, sig.Fast)

	l, sig, err := r.step(t)
	require.NoError(t, err, "the fast signal has a rate: it weighs alone")
	assert.Equal(t, PipelineCalibrated, sig.Pipeline)
	assert.Len(t, l, 3)
	assert.Equal(t, 3, sig.Uncalibrated)
	assert.Equal(t, time.Duration(-1), sig.ExternalAge)
	assert.Empty(t, sig.Expired)
}

// A fast signal that failed and a source that fails: not ErrFastStarting
// (that is a dead signal, not a start).
func TestFreshDeadAndSourceFailingIsNotStarting(t *testing.T) {
	r := newFreshRig(t, true)
	r.ext.err = errors.New("prometheus: connection refused")
	r.local.err = errors.New("show sess all: permission denied")
	_, _, err := r.step(t)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrFastStarting)
}

// backgroundExternal is a BackgroundSource on the fake clock: a fetch
// started ends by the next cycle (the clock moved), and the first Take waits
// for its own.
type backgroundExternal struct {
	clock     *time.Time
	ext       *fakeExternal
	starts    []time.Time
	pending   *Answer
	pendingAt time.Time
	ready     *Answer
	taken     bool
}

func (b *backgroundExternal) Fetch(context.Context, []ServerState) (Loads, error) {
	panic("a BackgroundSource is started and taken, not fetched")
}

func (b *backgroundExternal) Start([]ServerState) {
	b.settle()
	if b.pending == nil {
		l, err := b.ext.Fetch(context.Background(), nil)
		b.pending, b.pendingAt = &Answer{Loads: l, Err: err}, *b.clock
		b.starts = append(b.starts, *b.clock)
	}
}

func (b *backgroundExternal) Take(context.Context) (Answer, bool, error) {
	b.settle()
	if !b.taken && b.ready == nil && b.pending != nil {
		b.ready, b.pending = b.pending, nil
	}
	if b.ready == nil {
		return Answer{}, false, nil
	}
	got := *b.ready
	b.ready, b.taken = nil, true
	return got, true, nil
}

func (b *backgroundExternal) settle() {
	if b.pending != nil && b.clock.After(b.pendingAt) {
		b.ready, b.pending = b.pending, nil
	}
}

// The Fresh's refresh is the one schedule of a background source: while its
// loads weigh (the fast signal dead) every cycle takes the newest answer as
// soon as it has come back, but a fetch starts once per Refresh, exactly (no
// second clock in the wrapper, no slack between the two); an error is the
// cycle's answer until the next fetch's.
func TestFreshStartsABackgroundSourceOncePerRefresh(t *testing.T) {
	now := t0
	ext := &fakeExternal{clock: &now, loads: map[string]float64{"s1": 100, "s2": 200}}
	bg := &backgroundExternal{clock: &now, ext: ext}
	local := &fakeLocal{clock: &now, err: errors.New("socket gone")}
	src, err := NewFresh(FreshConfig{Fast: local, External: bg, Calibrate: true,
		Calibration: DefaultCalibration(30 * time.Second), Refresh: 15 * time.Second, Now: func() time.Time { return now }})
	require.NoError(t, err)
	for i := range 60 { // a minute of 1 s cycles
		loads, sig, err := src.FetchSignal(context.Background(), nil)
		require.NoError(t, err, "cycle %d", i)
		assert.Equal(t, FastDead, sig.Fast)
		assert.True(t, sig.ExternalFetched)
		newest := bg.starts[len(bg.starts)-1]
		if len(bg.starts) > 1 && now.Equal(newest) {
			newest = bg.starts[len(bg.starts)-2] // started this cycle: its answer comes next cycle
		}
		assert.Equal(t, newest, loads["s1"][0].Time, "cycle %d: the newest answer", i)
		now = now.Add(time.Second)
	}
	assert.Equal(t, []time.Time{t0, t0.Add(15 * time.Second), t0.Add(30 * time.Second), t0.Add(45 * time.Second)}, bg.starts)

	ext.err = errors.New("prometheus: connection refused")
	now = t0.Add(75 * time.Second)
	_, _, err = src.FetchSignal(context.Background(), nil) // starts the failing fetch
	require.NoError(t, err, "the answer of the fetch before")
	now = now.Add(time.Second)
	_, sig, err := src.FetchSignal(context.Background(), nil)
	require.ErrorContains(t, err, "connection refused")
	assert.Equal(t, "prometheus: connection refused", sig.ExternalError)
	now = now.Add(time.Second)
	_, _, err = src.FetchSignal(context.Background(), nil)
	require.ErrorContains(t, err, "connection refused", "kept until the next fetch's answer")
	assert.Len(t, bg.starts, 5)
}

// TestCombineFastCountsNewConnectionsAtTheMean: the connections without a
// rate yet (FreshRate, FreshSessions) are left out of the load per
// connection while the server has others, so they count at the others'
// mean; a server whose every connection is new counts them; fresh parts
// that cannot be (NaN, more than the whole) are ignored.
func TestCombineFastCountsNewConnectionsAtTheMean(t *testing.T) {
	for _, tc := range []struct {
		name      string
		c         LocalCounter
		want      float64
		wantFresh float64
	}{
		{"one rated at 25 B/s, one new with 300 B over the span", LocalCounter{Rate: 175, Sessions: 1.5, FreshRate: 150, FreshSessions: 0.5}, 25, 0.5},
		{"one rated, one new with a byte", LocalCounter{Rate: 100_000.5, Sessions: 1.5, FreshRate: 0.5, FreshSessions: 0.5}, 100_000, 0.5},
		{"every connection new", LocalCounter{Rate: 300, Sessions: 1, FreshRate: 300, FreshSessions: 1}, 300, 0},
		{"no new connection", LocalCounter{Rate: 300, Sessions: 3}, 100, 0},
		{"fresh rate NaN", LocalCounter{Rate: 300, Sessions: 3, FreshRate: math.NaN(), FreshSessions: 1}, 100, 0},
		{"fresh rate above the rate", LocalCounter{Rate: 300, Sessions: 3, FreshRate: 400, FreshSessions: 1}, 100, 0},
		{"fresh sessions infinite", LocalCounter{Rate: 300, Sessions: 3, FreshRate: 30, FreshSessions: math.Inf(1)}, 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loads, in := CombineFast(LocalRead{At: t0, Servers: map[string]LocalCounter{"s1": tc.c}}, nil)
			require.Contains(t, loads, "s1")
			assert.InDelta(t, tc.want, loads["s1"][0].Value, 1e-9)
			assert.InDelta(t, tc.wantFresh, in["s1"].Fresh, 1e-9)
		})
	}
	_, in := CombineFast(LocalRead{At: t0, Servers: map[string]LocalCounter{"s1": {Rate: 175, Sessions: 1.5, FreshRate: 150, FreshSessions: 0.5}}}, nil)
	assert.Equal(t, "fast 25 B/s / 1 sess (+0.5 new, at the mean)", fastNote(in["s1"], false, false))
}

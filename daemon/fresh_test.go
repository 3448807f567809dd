package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/metrics"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// clockLocal is HAProxy's fast signal read at the fake clock's time: s1 and
// s2 carry 100 B/s over two connections each, and s2 costs twice as much per
// byte (what clockExternal says).
type clockLocal struct {
	mu    sync.Mutex
	clock *testenv.Clock
	last  time.Time
	total float64
	err   error
}

func (l *clockLocal) ReadLocal(context.Context, []weighter.ServerState) (weighter.LocalRead, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return weighter.LocalRead{}, l.err
	}
	now := l.clock.Now()
	if !l.last.IsZero() {
		l.total += 100 * now.Sub(l.last).Seconds()
	}
	r := weighter.LocalRead{At: now, Since: l.last, Streams: 4, Servers: map[string]weighter.LocalCounter{}}
	for _, s := range []string{"s1", "s2"} {
		r.Servers[s] = weighter.LocalCounter{Bytes: l.total, Rate: 100, Sessions: 2, Reset: l.last.IsZero()}
	}
	l.last = now
	return r, nil
}

func (l *clockLocal) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

// clockExternal is the servers' true load now: s1 100, s2 200.
type clockExternal struct {
	mu    sync.Mutex
	clock *testenv.Clock
	err   error
}

func (e *clockExternal) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return nil, e.err
	}
	now := e.clock.Now()
	return weighter.Loads{"s1": {{Time: now, Value: 100}}, "s2": {{Time: now, Value: 200}}}, nil
}

func (e *clockExternal) fail(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err = err
}

// A backend's runner over the fresh source: each fallback shows in the
// metrics and is logged once, and the cycles go on.
func TestFreshFallbacksThroughTheRunner(t *testing.T) {
	clock := testenv.NewClock()
	local, ext := &clockLocal{clock: clock}, &clockExternal{clock: clock}
	fresh, err := weighter.NewFresh(weighter.FreshConfig{Fast: local, External: ext, Calibrate: true,
		Calibration: weighter.DefaultCalibration(30 * time.Second), Refresh: 15 * time.Second, Now: clock.Now})
	require.NoError(t, err)
	p := weighter.DefaultPolicy()
	p.MaxStep, p.Deadband = 0, 0
	ctl, err := weighter.NewController(p)
	require.NoError(t, err)
	tgt := &fakeTarget{weights: map[string]int{"s1": 100, "s2": 100}}
	u := &managedBackend{Backend: &weighter.Weigher{Name: "be", Source: fresh, Target: tgt, Controller: ctl}}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	var logs strings.Builder
	r := newRunner(u, Timing{Interval: 2 * time.Second, Timeout: 2 * time.Second}, clock, m, slog.New(slog.NewTextHandler(&logs, nil)))
	state := func(s string) float64 {
		return testutil.ToFloat64(gaugeOf(t, reg, "haproxy_weighter_fast_signal_state", "be", s))
	}
	steps := func(d time.Duration) weighter.Cycle {
		var c weighter.Cycle
		for end := clock.Now().Add(d); clock.Now().Before(end); {
			clock.Advance(2 * time.Second)
			c = r.step(context.Background())
			require.Equal(t, weighter.ResultOK, c.Result, "%v", c.Err)
		}
		return c
	}

	c := steps(3 * time.Minute)
	assert.Equal(t, weighter.PipelineCalibrated, c.Signal.Pipeline)
	assert.Equal(t, 1.0, state("live"))
	assert.Less(t, tgt.weights["s2"], tgt.weights["s1"], "s2 costs more per byte: %v", tgt.weights)

	// Fast signal dead: the external loads alone, said once.
	logs.Reset()
	local.fail(errors.New("show sess all: Permission denied"))
	c = steps(10 * time.Second)
	assert.Equal(t, weighter.PipelineExternal, c.Signal.Pipeline)
	assert.Equal(t, 1.0, state("dead"))
	assert.Equal(t, 1, strings.Count(logs.String(), "fast signal dead"), logs.String())
	local.fail(nil)
	c = steps(4 * time.Second)
	assert.Equal(t, 1.0, state("live"))
	assert.Equal(t, 1, strings.Count(logs.String(), "fast signal alive again"), logs.String())

	// External down: held, then expired (fast alone), then back.
	logs.Reset()
	ext.fail(errors.New("prometheus: connection refused"))
	c = steps(11 * time.Minute)
	assert.Equal(t, 2, c.Signal.Uncalibrated)
	assert.Equal(t, 2.0, testutil.ToFloat64(gaugeOf(t, reg, "haproxy_weighter_backend_uncalibrated_servers", "be", "")))
	assert.Greater(t, testutil.ToFloat64(gaugeOf(t, reg, "haproxy_weighter_external_data_age_seconds", "be", "")), 600.0)
	assert.Equal(t, 1, strings.Count(logs.String(), "calibrating source failing"), logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), `msg="calibration expired"`), logs.String())
	for _, s := range c.Plan.Servers {
		assert.Contains(t, s.Reason, "calibration expired")
	}
	ext.fail(nil)
	c = steps(2 * time.Minute)
	assert.Zero(t, c.Signal.Uncalibrated)
	assert.Contains(t, logs.String(), "calibrating source back")
}

// gaugeOf returns the series of name with backend (and state, if set).
func gaugeOf(t *testing.T, reg *prometheus.Registry, name, backend, state string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["backend"] == backend && (state == "" || labels["state"] == state) {
				g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
				g.Set(mt.GetGauge().GetValue())
				return g
			}
		}
	}
	t.Fatalf("no series %s{backend=%q,state=%q}", name, backend, state)
	return nil
}

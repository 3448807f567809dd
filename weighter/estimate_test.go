package weighter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// withSessions returns up servers with the given weights and session counts.
func withSessions(weights []int, sessions ...int) []ServerState {
	out := up(weights...)
	for i := range out {
		out[i].Sessions = sessions[i]
	}
	return out
}

// estimateRun feeds a connection_life Controller session counts at t0−20s and
// t0, then at t0+30s two points per server (t0−10s and t0, loads 10 and 40)
// with 20 and 10 sessions now, and returns the new weights.
func estimateRun(t *testing.T, rateWindow time.Duration) []int {
	p := free()
	p.ConnectionLife, p.RateWindow = duration.Duration(30*time.Second), duration.Duration(rateWindow)
	c := mustController(t, p)
	c.Plan(t0.Add(-20*time.Second), nil, withSessions([]int{256, 256}, 30, 10))
	c.Plan(t0, nil, withSessions([]int{256, 256}, 10, 10))
	loads := Loads{}
	for i, v := range []float64{10, 40} {
		loads[name(i)] = Series{{Time: t0.Add(-10 * time.Second), Value: v}, {Time: t0, Value: v}}
	}
	plan := c.Plan(t0.Add(30*time.Second), loads, withSessions([]int{256, 256}, 20, 10))
	require.False(t, plan.Hold, plan.Reason)
	assert.Equal(t, []float64{10, 40}, []float64{plan.Servers[0].Load, plan.Servers[1].Load}, "the plan shows the loads")
	return []int{plan.Servers[0].New, plan.Servers[1].New}
}

// TestConnectionLifeEstimate checks the estimate by hand. Without rate_window
// the window is the 10 s gap between the points: sessions then are those read
// at t0 (10, 10); the age is 30 s + 5 s, so s = exp(−35/30) = 0.3114 of those
// connections are still open; r̄ = 50/20 = 2.5.
//
//	s1: (0.3114·10 + (20 − 3.114)·2.5) / 20 = 2.266
//	s2: (0.3114·40 + (10 − 3.114)·2.5) / 10 = 2.967
//
// limited-proportions (no floor hit) gives 256 and 256·2.266/2.967 = 195.5.
func TestConnectionLifeEstimate(t *testing.T) {
	assert.Equal(t, []int{256, 196}, estimateRun(t, 0))
}

// TestConnectionLifeRateWindow: with rate_window 20s, sessions then are the
// mean over [t0−20s, t0]: s1 (30+10)/2 = 20, s2 10; the age is 30 s + 10 s,
// s = exp(−40/30) = 0.2636; r̄ = 50/30.
//
//	s1: (0.2636·10 + (20 − 5.272)·1.667) / 20 = 1.359
//	s2: (0.2636·40 + (10 − 2.636)·1.667) / 10 = 2.282
//
// weights 256 and 256·1.359/2.282 = 152.5.
func TestConnectionLifeRateWindow(t *testing.T) {
	assert.Equal(t, []int{256, 152}, estimateRun(t, 20*time.Second))
}

// TestConnectionLifeWithoutSessions: a target that reports no sessions leaves
// the loads as they are.
func TestConnectionLifeWithoutSessions(t *testing.T) {
	p := free()
	p.ConnectionLife = duration.Duration(30 * time.Second)
	plain := mustController(t, free()).Plan(t0, loadsAt(t0, 10, 40), up(256, 256))
	est := mustController(t, p).Plan(t0, loadsAt(t0, 10, 40), up(256, 256))
	assert.Equal(t, plain.Servers, est.Servers)
}

// TestConnectionLifeSessionHistoryIsBounded: counts are kept for the last
// sessionSamples cycles, and forgotten for a server that left.
func TestConnectionLifeSessionHistoryIsBounded(t *testing.T) {
	p := free()
	p.ConnectionLife = duration.Duration(30 * time.Second)
	c := mustController(t, p)
	for i := range 2 * sessionSamples {
		c.Plan(t0.Add(time.Duration(i)*time.Second), nil, withSessions([]int{9, 9}, i, 1))
	}
	h := c.roster.find("s1").history.sessions
	require.Len(t, h, sessionSamples)
	assert.Equal(t, sessionSamples, h[0].n, "the oldest kept")
	c.Plan(t0.Add(time.Hour), nil, withSessions([]int{9}, 1))
	assert.Nil(t, c.roster.find("s2"), "s2 left: its history is gone")
}

// TestConnectionLifeOffKeepsNoHistory: the default policy stores nothing.
func TestConnectionLifeOffKeepsNoHistory(t *testing.T) {
	c := mustController(t, DefaultPolicy())
	c.Plan(t0, loadsAt(t0, 1, 2), withSessions([]int{9, 9}, 3, 4))
	for _, m := range c.roster.mems {
		assert.Nil(t, m.history)
	}
	assert.Len(t, c.roster.mems, 2)
}

func TestConnectionLifeValidate(t *testing.T) {
	p := DefaultPolicy()
	p.ConnectionLife, p.RateWindow = duration.Duration(-time.Second), duration.Duration(-time.Second)
	err := p.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connection_life must be >= 0, got -1s")
	assert.Contains(t, err.Error(), "rate_window must be >= 0, got -1s")
}

// TestConnectionLifeHugeLoads: an estimate that would overflow falls back to the loads.
func TestConnectionLifeHugeLoads(t *testing.T) {
	p := free()
	p.ConnectionLife = duration.Duration(30 * time.Second)
	loads := loadsAt(t0, 1e308, 1e308, 1)
	plain := mustController(t, free()).Plan(t0, loads, withSessions([]int{9, 9, 9}, 1, 1, 5))
	est := mustController(t, p).Plan(t0, loads, withSessions([]int{9, 9, 9}, 1, 1, 5))
	assert.Equal(t, plain.Servers, est.Servers)
}

package weighter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var calEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return calEpoch.Add(time.Duration(s * float64(time.Second))) }

func newCal(t *testing.T, p CalibrationPolicy) *Calibrator {
	t.Helper()
	c, err := NewCalibrator(p)
	require.NoError(t, err)
	return c
}

// feed runs a backend whose servers carry constant local rates and true loads
// = cost × local + background: local counters every 2 s, an external point of
// the true load over the last window every 15 s.
func feed(c *Calibrator, until float64, local, cost, bg map[string]float64, window float64) {
	for t := 0.0; t <= until; t += 2 {
		counters := map[string]float64{}
		for name, r := range local {
			counters[name] = r * t
		}
		c.Local(at(t), counters)
		if int(t)%30 == 0 && t >= window {
			loads := Loads{}
			for name, r := range local {
				loads[name] = Series{{Time: at(t), Value: cost[name]*r + bg[name]}}
			}
			c.External(loads)
		}
	}
}

func TestCalibrationRatioFindsCostAndNormalises(t *testing.T) {
	c := newCal(t, DefaultCalibration(30*time.Second))
	local := map[string]float64{"a": 100, "b": 100, "c": 50, "d": 100}
	cost := map[string]float64{"a": 1, "b": 1.5, "c": 1, "d": 1}
	feed(c, 600, local, cost, nil, 30)
	f := c.Factors(at(600), []string{"a", "b", "c", "d"})
	// raw ratios 1, 1.5, 1, 1: mean 1.125
	assert.InDelta(t, 1/1.125, f["a"].Factor, 1e-9)
	assert.InDelta(t, 1.5/1.125, f["b"].Factor, 1e-9)
	assert.InDelta(t, 1/1.125, f["c"].Factor, 1e-9, "a ratio is per local byte: half the traffic, same factor")
	for _, x := range f {
		assert.True(t, x.Calibrated)
		assert.Empty(t, x.Reason)
	}
	// The estimate: factor × local / sessions.
	assert.InDelta(t, 1.5/1.125*100/10, f["b"].Apply(100, 10), 1e-9)
}

func TestCalibrationAlignsTheWindowNotTheReadTime(t *testing.T) {
	// The local rate doubles at t=300; an external point stamped 240 (window
	// 210-240) that is read at 330 must be compared with the local rate of
	// 210-240, not with the newest.
	c := newCal(t, CalibrationPolicy{Mode: CalibrateRatio, Window: 30 * time.Second, Hold: time.Hour, MaxFactor: 4})
	counter := func(t float64) float64 { return 100*t + 100*math.Max(t-300, 0) }
	for s := 0.0; s <= 330; s += 2 {
		c.Local(at(s), map[string]float64{"a": counter(s), "b": counter(s)})
	}
	c.External(Loads{"a": {{Time: at(240), Value: 150}}, "b": {{Time: at(240), Value: 100}}})
	f := c.Factors(at(330), []string{"a", "b"})
	assert.InDelta(t, 1.5/1.25, f["a"].Factor, 1e-9)
	assert.InDelta(t, 1/1.25, f["b"].Factor, 1e-9)
}

func TestCalibrationOffset(t *testing.T) {
	p := DefaultCalibration(30 * time.Second)
	p.Mode, p.HalfLife = CalibrateOffset, 0
	c := newCal(t, p)
	feed(c, 300, map[string]float64{"a": 100, "b": 100}, map[string]float64{"a": 1, "b": 1}, map[string]float64{"b": 40}, 30)
	f := c.Factors(at(300), []string{"a", "b"})
	assert.InDelta(t, 0, f["a"].Offset, 1e-9)
	assert.InDelta(t, 40, f["b"].Offset, 1e-9)
	assert.InDelta(t, 14, f["b"].Apply(100, 10), 1e-9, "(offset + local) / sessions")
	assert.InDelta(t, 0, Calibration{Factor: 1, Offset: -500}.Apply(100, 10), 1e-9, "never negative")
}

func TestCalibrationHeldThenExpires(t *testing.T) {
	p := DefaultCalibration(30 * time.Second)
	c := newCal(t, p)
	feed(c, 300, map[string]float64{"a": 100, "b": 100}, map[string]float64{"a": 2, "b": 1}, nil, 30)
	before := c.Factors(at(300), []string{"a", "b"})
	require.True(t, before["a"].Calibrated)
	// The external source goes quiet (no points, then NaN points); the local
	// side goes on.
	for s := 302.0; s <= 300+p.Hold.Seconds()+60; s += 2 {
		c.Local(at(s), map[string]float64{"a": 100 * s, "b": 100 * s})
		c.External(Loads{"a": {{Time: at(s), Value: math.NaN()}}})
		if s <= 300+p.Hold.Seconds() {
			assert.Equal(t, before, c.Factors(at(s), []string{"a", "b"}), "held at %vs", s)
		}
	}
	after := c.Factors(at(300+p.Hold.Seconds()+60), []string{"a", "b"})
	assert.Equal(t, 1.0, after["a"].Factor)
	assert.False(t, after["a"].Calibrated)
	assert.Contains(t, after["a"].Reason, "calibration expired")
}

func TestCalibrationNoLocalTrafficNoRatio(t *testing.T) {
	c := newCal(t, DefaultCalibration(30*time.Second))
	feed(c, 300, map[string]float64{"a": 100, "b": 0}, map[string]float64{"a": 1, "b": 1}, map[string]float64{"b": 50}, 30)
	f := c.Factors(at(300), []string{"a", "b"})
	assert.False(t, f["b"].Calibrated, "b had no local traffic to compare with")
	assert.Contains(t, f["b"].Reason, "no calibration yet")
	assert.Equal(t, 1.0, f["a"].Factor)
}

func TestCalibrationClamped(t *testing.T) {
	c := newCal(t, DefaultCalibration(30*time.Second))
	feed(c, 300, map[string]float64{"a": 100, "b": 100, "c": 100}, map[string]float64{"a": 1, "b": 1, "c": 100}, nil, 30)
	f := c.Factors(at(300), []string{"a", "b", "c"})
	assert.Contains(t, f["c"].Reason, "clamped")
	assert.InDelta(t, 4, f["c"].Factor/f["a"].Factor, 1e-9, "at most MaxFactor × the median")
	assert.InDelta(t, 3, f["a"].Factor+f["b"].Factor+f["c"].Factor, 1e-9)
}

func TestCalibrationCounterReset(t *testing.T) {
	c := newCal(t, DefaultCalibration(30*time.Second))
	for s := 0.0; s <= 60; s += 2 {
		c.Local(at(s), map[string]float64{"a": 1e6 + 100*s})
	}
	c.Local(at(62), map[string]float64{"a": 0}) // reload: the counter restarts
	for s := 64.0; s <= 100; s += 2 {
		c.Local(at(s), map[string]float64{"a": 100 * (s - 62)})
	}
	// A window reaching across the reset is not covered: no ratio from it.
	c.External(Loads{"a": {{Time: at(80), Value: 100}}})
	assert.False(t, c.Factors(at(100), []string{"a"})["a"].Calibrated)
	c.External(Loads{"a": {{Time: at(96), Value: 100}}})
	assert.True(t, c.Factors(at(100), []string{"a"})["a"].Calibrated)
}

func TestCalibrationPolicyValidate(t *testing.T) {
	good := DefaultCalibration(30 * time.Second)
	require.NoError(t, good.Validate())
	for _, bad := range []func(p *CalibrationPolicy){
		func(p *CalibrationPolicy) { p.Mode = "x" },
		func(p *CalibrationPolicy) { p.Window = 0 },
		func(p *CalibrationPolicy) { p.HalfLife = -1 },
		func(p *CalibrationPolicy) { p.Hold = 0 },
		func(p *CalibrationPolicy) { p.MaxFactor = 1 },
		func(p *CalibrationPolicy) { p.MaxFactor = math.NaN() },
	} {
		p := good
		bad(&p)
		assert.Error(t, p.Validate())
	}
}

// randomValue is a load or counter value, sometimes invalid.
func randomValue(rng *rand.Rand, scale float64) float64 {
	switch rng.IntN(20) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1 - 2*rng.IntN(2))
	case 2:
		return -rng.Float64() * scale
	case 3:
		return 0
	case 4:
		return rng.Float64() * 1e12
	}
	return rng.Float64() * scale
}

// TestCalibrationProperties feeds random (and broken) local counters and external
// points and checks after every step: no factor or estimate is NaN, infinite or
// negative; the factors of the named servers average 1 (ratio modes); and a server
// without a new usable external point keeps its calibration exactly.
func TestCalibrationProperties(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		p := CalibrationPolicy{
			Mode:      []string{CalibrateRatio, CalibrateRatioEWMA, CalibrateOffset}[rng.IntN(3)],
			Window:    time.Duration(1+rng.IntN(60)) * time.Second,
			HalfLife:  time.Duration(rng.IntN(600)) * time.Second,
			Hold:      time.Duration(1+rng.IntN(600)) * time.Second,
			MaxFactor: 1 + rng.Float64()*10,
		}
		c := newCal(t, p)
		names := []string{"a", "b", "c", "d", "e"}[:1+rng.IntN(5)]
		counters := map[string]float64{}
		now := 0.0
		for step := range 150 {
			now += float64(1 + rng.IntN(5))
			local := map[string]float64{}
			for _, n := range names {
				if rng.IntN(10) == 0 {
					continue // a server missing from a read
				}
				counters[n] += math.Max(randomValue(rng, 1000), 0) * (1 + rng.Float64())
				v := counters[n]
				if rng.IntN(40) == 0 {
					v = randomValue(rng, 1e6) // broken read, reset
				}
				local[n] = v
			}
			c.Local(at(now), local)
			before := c.Factors(at(now), names)
			raw := map[string][4]float64{}
			for _, n := range names {
				raw[n] = c.rawRatio(n)
			}
			loads := Loads{}
			touched := map[string]bool{}
			for _, n := range names {
				if rng.IntN(3) != 0 {
					continue // no point for this server this time
				}
				pt := Point{Time: at(now - rng.Float64()*60), Value: randomValue(rng, 5000)}
				loads[n] = Series{pt}
				touched[n] = true
			}
			c.External(loads)
			after := c.Factors(at(now), names)
			sum := 0.0
			for _, n := range names {
				f := after[n]
				for _, x := range []float64{f.Factor, f.Apply(rng.Float64()*1000, rng.Float64()*50)} {
					require.False(t, math.IsNaN(x) || math.IsInf(x, 0) || x < 0, "seed %d step %d %s: %+v", seed, step, n, f)
				}
				if !touched[n] {
					require.Equal(t, raw[n], c.rawRatio(n), "seed %d step %d %s: no point, no change", seed, step, n)
					if p.Mode == CalibrateOffset {
						require.Equal(t, before[n], f, "seed %d step %d %s: no point, no change", seed, step, n)
					}
				}
				sum += f.Factor
			}
			if p.Mode != CalibrateOffset {
				// Ratios are normalised together, so a server's factor may move when
				// another's ratio does; its own ratio (checked above) must not.
				require.InDelta(t, float64(len(names)), sum, 1e-9*float64(len(names)), "seed %d step %d: mean 1", seed, step)
			}
		}
	}
}

// TestMissingPointNeverMovesARatio: with the other servers' points, a server that
// gets no point (or an invalid one) keeps its own ratio exactly.
func TestMissingPointNeverMovesARatio(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, mode := range []string{CalibrateRatio, CalibrateRatioEWMA, CalibrateOffset} {
		p := DefaultCalibration(30 * time.Second)
		p.Mode = mode
		c := newCal(t, p)
		feed(c, 300, map[string]float64{"a": 100, "b": 80}, map[string]float64{"a": 1.3, "b": 1}, nil, 30)
		for s := 302.0; s < 600; s += 2 {
			c.Local(at(s), map[string]float64{"a": 100 * s, "b": 80 * s})
			ra := c.rawRatio("a")
			bad := []float64{math.NaN(), math.Inf(1), -1}[rng.IntN(3)]
			c.External(Loads{"b": {{Time: at(s), Value: 80 * (0.5 + rng.Float64())}}, "a": {{Time: at(s - 1), Value: bad}}})
			assert.Equal(t, ra, c.rawRatio("a"), "%s at %vs", mode, s)
		}
	}
}

// rawRatio is a server's own calibration state before normalisation.
func (c *Calibrator) rawRatio(name string) [4]float64 {
	s := c.servers[name]
	if s == nil {
		return [4]float64{}
	}
	return [4]float64{s.num, s.den, s.weight, s.ratio}
}

// TestCalibrationHistoryHoldsOnlyWhatAPointCanUse: at 1 s cycles with an
// external point every 15 s, a server keeps about Window + the refresh of
// local readings, not Window + Hold (11 minutes: at 1,000 servers, 21 MB of
// heap the daemon held for good). Trimming loses nothing: the factors equal
// those of a Calibrator that keeps Window + Hold; and what a silent source
// made the history grow to is given back once points come again.
func TestCalibrationHistoryHoldsOnlyWhatAPointCanUse(t *testing.T) {
	p := DefaultCalibration(time.Minute)
	c := newCal(t, p)
	whole := newCal(t, p)        // trims at keep() alone: its Local never sees consumed
	const most = 60 + 15 + 2 + 2 // Window + refresh + the point's lag + the reading before
	rng := rand.New(rand.NewPCG(3, 4))
	count := map[string]float64{}
	longest := 0
	step := func(from, to float64, external bool) {
		for s := from; s <= to; s++ {
			count["a"] += 100 * (0.5 + rng.Float64())
			count["b"] += 300 * (0.5 + rng.Float64())
			c.Local(at(s), count)
			saved := map[string]time.Time{}
			for name, ws := range whole.servers {
				saved[name], ws.consumed = ws.consumed, time.Time{}
			}
			whole.Local(at(s), count)
			for name, ws := range whole.servers {
				ws.consumed = saved[name]
			}
			if external && int(s)%15 == 0 && s >= 120 {
				loads := Loads{
					"a": Series{{Time: at(s - 2), Value: 100 * (1 + rng.Float64())}},
					"b": Series{{Time: at(s - 2), Value: 900 * (1 + rng.Float64())}},
				}
				c.External(loads)
				whole.External(loads)
			}
			if s >= 300 {
				longest = max(longest, len(c.servers["a"].hist), len(c.servers["b"].hist))
			}
		}
	}
	step(0, 1200, true)
	assert.LessOrEqual(t, longest, most, "readings kept per server")
	assert.LessOrEqual(t, cap(c.servers["a"].hist), 2*most, "capacity: not append's double of what the first two minutes kept")
	assert.Greater(t, len(whole.servers["a"].hist), 600, "the reference keeps Window + Hold")
	names := []string{"a", "b"}
	assert.Equal(t, whole.Factors(at(1200), names), c.Factors(at(1200), names), "trimming changes no factor")

	// A silent source: the history grows to keep() and is given back after.
	step(1201, 2100, false)
	assert.Greater(t, len(c.servers["a"].hist), 600)
	step(2101, 2400, true)
	assert.LessOrEqual(t, len(c.servers["a"].hist), most)
	assert.LessOrEqual(t, cap(c.servers["a"].hist), most*3/2, "capacity given back")
	assert.Equal(t, whole.Factors(at(2400), names), c.Factors(at(2400), names), "trimming changes no factor")
}

// BenchmarkCalibratorLocal1000: one cycle's Local at 1,000 servers every 1 s,
// after 12 minutes of readings and an external point every 15 s (what the
// daemon does at that size); the heap its histories hold is reported.
func BenchmarkCalibratorLocal1000(b *testing.B) {
	c, err := NewCalibrator(DefaultCalibration(time.Minute))
	require.NoError(b, err)
	names := make([]string, 1000)
	count := make(map[string]float64, len(names))
	for i := range names {
		names[i] = fmt.Sprintf("s%04d", i)
	}
	sec := 0
	cycle := func() {
		sec++
		for i, n := range names {
			count[n] += float64(100 + i)
		}
		c.Local(at(float64(sec)), count)
		if sec%15 == 0 {
			loads := make(Loads, len(names))
			for _, n := range names {
				loads[n] = Series{{Time: at(float64(sec - 2)), Value: 1}}
			}
			c.External(loads)
		}
	}
	for range 720 {
		cycle()
	}
	b.ResetTimer()
	for b.Loop() {
		cycle()
	}
	held := 0
	for _, s := range c.servers {
		held += cap(s.hist) * int(unsafe.Sizeof(counterSample{}))
	}
	b.ReportMetric(float64(held)/(1<<20), "MB-held")
}

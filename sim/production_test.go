package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func TestProductionScenarioFiles(t *testing.T) {
	files, err := filepath.Glob("../examples/scenarios/production/*.yaml")
	require.NoError(t, err)
	require.Len(t, files, len(ProductionScenarios()))
	for _, want := range ProductionScenarios() {
		sc, err := LoadScenario("../examples/scenarios/production/" + want.Name + ".yaml")
		require.NoError(t, err)
		assert.Equal(t, want, sc, "production scenario %s has its file", want.Name)
	}
	sc, err := LoadScenario("../examples/scenarios/drift-6m.yaml")
	require.NoError(t, err)
	assert.Equal(t, QuickDriftScenario(), sc, "the bench's drift has its file")
}

// shortProduction is 12 minutes of long-lived clients (5 min) behind three
// balancers, half of them drifting ×4 or ÷4, a burst of four heavy clients
// at 3 min and the first balancer restarting at 6 min.
func shortProduction() Scenario {
	sc := shortFleet()
	sc.MeanLife = 5 * time.Minute
	sc.Drift = &Drift{Share: 0.5, Factor: 4}
	sc.Events = []Event{
		{At: 3 * time.Minute, Kind: EventBurst, Count: 4, Rate: 1000, Over: time.Second},
		{At: 6 * time.Minute, Kind: EventRestart, Balancer: 0, Over: 5 * time.Second},
	}
	return sc
}

// TestProductionEventsKeepTheBooks: with bursts, drifts, a restart and
// shedding, under every placement and weighting, every balancer's servers carry exactly its open connections at
// every step, every open connection has its client's rate of the moment,
// the burst's clients arrive within its second, and the restarted balancer
// is empty at once and has all its clients back within its 5 s.
func TestProductionEventsKeepTheBooks(t *testing.T) {
	sc := shortProduction()
	str := newStream(sc)
	var burst []arrival
	for _, a := range str.arrivals {
		if a.Whale {
			burst = append(burst, a)
		}
	}
	require.Len(t, burst, 4)
	for _, a := range burst {
		assert.True(t, a.At >= 180 && a.At <= 181, "burst client at %v", a.At)
	}
	drifting := 0
	for _, a := range str.arrivals {
		if a.DriftAt > 0 {
			drifting++
			assert.Contains(t, []float64{4, 0.25}, a.DriftFactor)
		}
	}
	assert.InDelta(t, 0.5, float64(drifting)/float64(len(str.arrivals)), 0.05)

	eagerShed := eager()
	pipelines := []Pipeline{{Name: "leastconn", Kind: KindLeastconn}, ShippedShedPipeline("eager", eager()),
		ShippedPinPipeline("eager pin", weighter.DefaultPin(), &eagerShed)}
	pipelines = append(pipelines, Random2Arms()...)
	for _, st := range append(modelStrategies(), PerConnStrategy(weighter.DefaultPolicy())) {
		if st.Kind != KindLeastconn { // Run's strategies: roundrobin, agent-check, oracle, weighing by the source
			pipelines = append(pipelines, st.pipeline())
		}
	}
	for _, pl := range pipelines {
		t.Run(pl.Name, func(t *testing.T) {
			m, err := newModel(sc, pl, str, owners(sc, str))
			require.NoError(t, err)
			failures, before := 0, 0
			fail := func(format string, args ...any) {
				if failures < 3 {
					t.Errorf(format, args...)
				}
				failures++
			}
			m.onStep = func(m *model, now float64) {
				for k, lb := range m.lbs {
					if err := checkConserved(lb.b); err != nil {
						fail("balancer %d t=%.1fs: %v", k, now, err)
					}
					for _, d := range lb.b.departing {
						c := lb.b.conns[d.id]
						if want := m.str.arrivals[lb.client[d.id]].rateAt(now); math.Abs(c.rate-want) > 1e-9 {
							fail("t=%.1fs: connection %d at %g/s, its client at %g/s", now, d.id, c.rate, want)
						}
					}
				}
				restarted := m.lbs[0].b.departing.Len()
				switch {
				case math.Abs(now-359.9) < 1e-6:
					before = restarted
				case math.Abs(now-360) < 1e-6 && restarted != 0:
					fail("the restarted balancer still carries %d connections", restarted)
				case math.Abs(now-365) < 1e-6 && math.Abs(float64(restarted-before)) > 2:
					fail("5 s after the restart %d connections, %d before", restarted, before)
				}
			}
			_, err = m.run()
			require.NoError(t, err)
			assert.Positive(t, before)
		})
	}
}

// TestRandom2 is HAProxy's random(2): weights 256/1/1/1 put about 99 of 100
// connections on s1 (as a real HAProxy 2.6.12 does with runtime weights), and
// of two draws the one with fewer connections per weight wins.
func TestRandom2(t *testing.T) {
	pick := pickRandom2(rand.New(rand.NewPCG(1, 2)))
	servers := []*server{{name: "s1", up: true, weight: 256}, {name: "s2", up: true, weight: 1},
		{name: "s3", up: true, weight: 1}, {name: "s4", up: true, weight: 1}}
	onS1 := 0
	for range 10000 {
		if pick(servers) == 0 {
			onS1++
		}
	}
	assert.InDelta(t, 0.99, float64(onS1)/10000, 0.01)

	equal := []*server{{name: "a", up: true, weight: 1, active: 5}, {name: "b", up: true, weight: 1, active: 0}}
	onB := 0
	for range 10000 {
		if pick(equal) == 1 {
			onB++
		}
	}
	assert.InDelta(t, 0.75, float64(onB)/10000, 0.02, "b wins unless both draws are a")
	assert.Equal(t, -1, pick([]*server{{up: true, weight: 0}, {up: false, weight: 5}}))
}

func TestBurstHerd(t *testing.T) {
	sc := DefaultScenario()
	sc.Events = []Event{{At: 100 * time.Second, Kind: EventBurst, Count: 3, Rate: 50, Over: time.Second}}
	whales := []arrival{{At: 100, Rate: 50}, {At: 100.5, Rate: 50}, {At: 101, Rate: 50}}
	tr := trace{windows: []window{
		{end: 100, whales: []int{-1, -1, -1}},
		{end: 110, whales: []int{2, 2, 5}},
		{end: 120, whales: []int{2, 3, 5}},
	}}
	assert.Equal(t, []int{2}, burstHerd(sc, tr, whales))
}

func TestHerdCandidatesChangeOnlyTheRunBound(t *testing.T) {
	for _, pl := range HerdCandidates() {
		_, r, err := pl.daemonCandidate(LongLivedScenario())
		require.NoError(t, err)
		p := *r.Policy
		def := weighter.DefaultPolicy()
		for key, v := range map[string][2]float64{
			"max_run":         {p.MaxRun, def.MaxRun},
			"run_churn":       {p.RunChurn, def.RunChurn},
			"run_rare":        {p.RunRare, def.RunRare},
			"run_rare_spread": {float64(p.RunRareSpread), float64(def.RunRareSpread)},
		} {
			if v[0] != v[1] {
				assert.Contains(t, pl.Name, fmt.Sprintf(" %s=%g", key, v[0]), "the candidate's Adjust sets what its name says")
			}
		}
		p.MaxRun, p.RunChurn, p.RunRare, p.RunRareSpread = def.MaxRun, def.RunChurn, def.RunRare, def.RunRareSpread
		assert.Equal(t, def, p, pl.Name)
	}
}

// TestRestartLosesTheUnreadBytes: a restart closes the balancer's
// connections with what they sent since the daemon's last read unread, as
// the socket table loses a real HAProxy's sockets with its process: the
// reader's lost counter grows by exactly that, and only at the restart.
func TestRestartLosesTheUnreadBytes(t *testing.T) {
	sc := shortProduction()
	str := newStream(sc)
	m, err := newModel(sc, ShippedPipeline(), str, owners(sc, str))
	require.NoError(t, err)
	lb := m.lbs[0]
	require.NotNil(t, lb.reader)
	lostSum := func() float64 {
		s := 0.0
		for _, v := range lb.reader.lost {
			s += v
		}
		return s
	}
	want, checked := 0.0, false
	m.onStep = func(m *model, now float64) {
		switch {
		case now < 359.9-1e-6:
			assert.Zero(t, lostSum(), "t=%.1fs", now)
		case math.Abs(now-359.9) < 1e-6:
			for _, d := range lb.b.departing {
				c := lb.b.conns[d.id]
				want += c.rate * (360 - max(lb.reader.lastAt, lb.since[d.id]))
			}
		case math.Abs(now-360) < 1e-6:
			assert.InDelta(t, want, lostSum(), 1e-6*want)
			checked = true
		}
	}
	_, err = m.run()
	require.NoError(t, err)
	require.True(t, checked)
	assert.Positive(t, want)
}

// TestRampAndDriftWindow: with a ramp the initial population arrives over
// it, the same clients (rates, lives) as without; with a drift window every
// drift falls inside it, after its client connected, and a client that
// connected after its drawn moment does not drift.
func TestRampAndDriftWindow(t *testing.T) {
	sc := LongLivedScenario()
	sc.Duration, sc.Warmup = 6*time.Minute, time.Minute
	flat := newStream(sc)
	sc.Ramp = time.Minute
	sc.Drift = &Drift{Share: 0.3, Factor: 10, From: time.Minute, To: 6 * time.Minute}
	ramped := newStream(sc)
	require.Equal(t, len(flat.arrivals), len(ramped.arrivals))
	rates := func(s *stream) map[float64]bool {
		m := map[float64]bool{}
		for _, a := range s.arrivals {
			m[a.Rate] = true
		}
		return m
	}
	assert.Equal(t, rates(flat), rates(ramped), "the ramp moves the clients, it does not change them")
	initial := map[float64]bool{}
	for _, a := range flat.arrivals {
		if a.At == 0 {
			initial[a.Rate] = true
		}
	}
	require.Len(t, initial, sc.Connections)
	first, late, drifting, lateDrifting := 0, 0, 0, 0
	for _, a := range ramped.arrivals {
		if initial[a.Rate] {
			assert.True(t, a.At > 0 && a.At < 60, "initial client at %v", a.At)
			first++
		}
	}
	for _, a := range ramped.arrivals {
		if a.At >= 60 {
			late++
		}
		if a.DriftAt == 0 {
			continue
		}
		drifting++
		if a.At >= 60 {
			lateDrifting++
		}
		assert.True(t, a.DriftAt >= 60 && a.DriftAt < 360, "drift at %v", a.DriftAt)
		assert.True(t, a.DriftAt >= a.At, "drift at %v before its client at %v", a.DriftAt, a.At)
		assert.Contains(t, []float64{10, 0.1}, a.DriftFactor)
	}
	assert.Equal(t, sc.Connections, first, "every initial client moved off 0")
	assert.InDelta(t, 0.3, float64(drifting)/float64(len(ramped.arrivals)), 0.06)
	require.Positive(t, late)
	assert.Less(t, float64(lateDrifting)/float64(late), 0.3, "late clients drift only when their moment falls after them")

	sc.Ramp = 7 * time.Minute
	assert.Error(t, sc.Validate())
	sc.Ramp, sc.Drift.To = 0, 30*time.Second
	assert.Error(t, sc.Validate())
}

// TestBlocksAboveLeastconn: the world comparison counts the blocks of four
// consecutive seeds whose mean is above leastconn's, p50 and p90 apart, and
// prints them only with two blocks or more.
func TestBlocksAboveLeastconn(t *testing.T) {
	r := &ShedResult{
		Scenarios: []Scenario{{Name: "drift-6m"}},
		Names:     []string{"leastconn", "oracle"},
		Seeds:     9,
		Cells: [][]ShedCell{
			{{SeedP50: []float64{2, 2, 2, 2, 2, 2, 2, 2, 9}, SeedP90: []float64{3, 3, 3, 3, 3, 3, 3, 3, 9}}},
			// Block 1: p50 below (mean 1.9), p90 above (mean 3.1); block 2: p50 above
			// by one seed's 2.5 (mean 2.05 > 2), p90 equal (not above); seed 9 is no block.
			{{SeedP50: []float64{1.8, 1.8, 2, 2, 2.5, 1.9, 1.9, 1.9, 0}, SeedP90: []float64{3.4, 3, 3, 3, 3, 3, 3, 3, 0}}},
		},
	}
	p50, p90, blocks := r.blocksAbove(1, 0)
	assert.Equal(t, []int{1, 1, 2}, []int{p50, p90, blocks}, "p50 above in block 2 only, p90 in block 1 only")
	var b strings.Builder
	r.writeBlocks(&b)
	assert.Contains(t, b.String(), "| blocks of 4 seeds with the mean above leastconn's, p50 / p90 (of 2) | drift-6m |")
	assert.Contains(t, b.String(), "| oracle | 1 / 1 |")
	assert.NotContains(t, b.String(), "| leastconn |")

	r.Seeds = 7
	b.Reset()
	r.writeBlocks(&b)
	assert.Empty(t, b.String(), "one block decides nothing beyond the means")
}

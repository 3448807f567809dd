package sim

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFreshScenarioFiles(t *testing.T) {
	files, err := filepath.Glob("../examples/scenarios/fresh/*.yaml")
	require.NoError(t, err)
	require.Len(t, files, len(FreshScenarios())+1)
	for _, f := range files {
		sc, err := LoadScenario(f)
		require.NoError(t, err, f)
		assert.Equal(t, filepath.Base(f), sc.Name+".yaml", "name matches the file")
	}
	for _, want := range FreshScenarios() {
		sc, err := LoadScenario("../examples/scenarios/fresh/" + want.Name + ".yaml")
		require.NoError(t, err)
		assert.Equal(t, want, sc, "fresh scenario %s has its file", want.Name)
	}
}

// shortFleet is fresh-heterogeneous with background and three balancers, 12 minutes.
func shortFleet() Scenario {
	sc := shortScenario()
	sc.Interval, sc.Resolution, sc.RateWindow = 2*time.Second, 15*time.Second, 30*time.Second
	sc.Costs = map[string]float64{"s3": 1.5}
	sc.Background = map[string]float64{"s4": 0.3}
	sc.Balancers = []float64{0.5, 0.3, 0.2}
	return sc
}

func TestFleetSameSeedSameFigures(t *testing.T) {
	sc := shortFleet()
	pls, err := SelectPipelines("fast×ratio,fast contstats")
	require.NoError(t, err)
	a, err := RunFleet(sc, pls)
	require.NoError(t, err)
	b, err := RunFleet(sc, pls)
	require.NoError(t, err)
	assert.Equal(t, a.Strategies, b.Strategies)
}

// TestFleetConservation checks at every step that each balancer's servers carry
// exactly its open connections, that the clients are shared out as the shares
// say, and that every fast signal shows no more than the exact counter and,
// with contstats, at most one tick less per open connection.
func TestFleetConservation(t *testing.T) {
	sc := shortFleet()
	str := newStream(sc)
	own := owners(sc, str)
	count := make([]float64, 3)
	for _, o := range own {
		count[o]++
	}
	for k, share := range sc.Balancers {
		assert.InDelta(t, share, count[k]/float64(len(own)), 0.02)
	}
	for _, sig := range []string{SignalLive, SignalContstats, SignalClosed} {
		pls, err := SelectPipelines("fast")
		require.NoError(t, err)
		pl := pls[len(pls)-1]
		pl.Signal = sig
		m, err := newModel(sc, pl, str, own)
		require.NoError(t, err)
		failures := 0
		// A reader of its own per balancer: the daemons' readers are theirs.
		readers := make([]*simReader, len(m.lbs))
		for k, lb := range m.lbs {
			readers[k] = newSimReader(m, lb, pl)
		}
		m.onStep = func(m *model, now float64) {
			if failures > 3 || int(now*10)%50 != 0 {
				return
			}
			for k, lb := range m.lbs {
				if err := checkConserved(lb.b); err != nil {
					failures++
					t.Errorf("%s balancer %d t=%.1fs: %v", sig, k, now, err)
				}
				var names []string
				for _, s := range lb.b.servers {
					names = append(names, s.name)
				}
				read, err := readers[k].ReadLocal(context.Background(), testenv.Servers(names...))
				require.NoError(t, err)
				for i, s := range lb.b.servers {
					if !s.up {
						continue
					}
					got, exact := read.Servers[s.name].Bytes/bytesPerLine, lb.b.counter(i, now)
					if got > exact+1e-6 || (sig == SignalContstats && got < exact-s.load*contstatsTick-1e-6) || math.IsNaN(got) {
						failures++
						t.Errorf("%s balancer %d %s t=%.1fs: signal %.1f, exact %.1f", sig, k, s.name, now, got, exact)
					}
				}
			}
		}
		_, err = m.run()
		require.NoError(t, err)
	}
}

func TestFleetScenarioChecks(t *testing.T) {
	for _, bad := range []func(sc *Scenario){
		func(sc *Scenario) { sc.Costs = map[string]float64{"s1": 0} },
		func(sc *Scenario) { sc.Background = map[string]float64{"s1": -1} },
		func(sc *Scenario) { sc.Balancers = []float64{1, 0} },
		func(sc *Scenario) { sc.FastSignal = "fast" },
		func(sc *Scenario) { sc.ExternalOutage = &Outage{From: time.Minute, To: time.Minute} },
	} {
		sc := DefaultScenario()
		bad(&sc)
		assert.Error(t, sc.Validate())
	}
	_, err := SelectPipelines("fast,nope")
	assert.ErrorContains(t, err, `unknown pipeline "nope"`)
}

// TestContstatsLumps pins the contstats model to what HAProxy 2.6 did with one
// connection sending 10 kB/s, read every 2 s: 0, 0, 25 000, 0, 25 000 bytes/s.
// The live signal shows 10 000 every time; without contstats, nothing until close.
func TestContstatsLumps(t *testing.T) {
	sc := DefaultScenario()
	sc.Interval = 2 * time.Second
	for sig, want := range map[string][]float64{
		SignalContstats: {0, 0, 25000, 0, 25000},
		SignalLive:      {10000, 10000, 10000, 10000, 10000},
		SignalClosed:    {0, 0, 0, 0, 0},
	} {
		lb := &balancer{b: newBackend(1, initialWeight, pickLeastconn)}
		lb.b.open(0, 10000, 100, 0)
		lb.since = append(lb.since, 0)
		m := &model{sc: sc, signal: sig}
		r := newSimReader(m, lb, Pipeline{})
		_, err := r.ReadLocal(context.Background(), testenv.Servers("s1"))
		require.NoError(t, err)
		var got []float64
		for now := 2.0; now <= 10; now += 2 {
			m.now = now
			read, err := r.ReadLocal(context.Background(), testenv.Servers("s1"))
			require.NoError(t, err)
			got = append(got, read.Servers["s1"].Rate/bytesPerLine)
		}
		assert.InDeltaSlice(t, want, got, 1e-6, sig)
	}
}

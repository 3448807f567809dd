package sim

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// shortScenario is the default scenario compressed to 12 minutes, one event of each kind.
func shortScenario() Scenario {
	sc := DefaultScenario()
	sc.Duration, sc.Warmup = 12*time.Minute, time.Minute
	sc.Events = []Event{
		{At: 3 * time.Minute, Kind: EventWhale, Count: 2, Rate: 3000, Life: 2 * time.Minute},
		{At: 5 * time.Minute, Kind: EventAdd},
		{At: 7 * time.Minute, Kind: EventRemove, Server: "s2"},
		{At: 9 * time.Minute, Kind: EventRamp, Factor: 1.5, Over: time.Minute},
	}
	return sc
}

func modelStrategies() []Strategy {
	return append(Baselines(), WeighterStrategy(weighter.DefaultPolicy()))
}

func TestSameSeedSameFigures(t *testing.T) {
	sc := shortScenario()
	a, err := Run(sc, modelStrategies())
	require.NoError(t, err)
	b, err := Run(sc, modelStrategies())
	require.NoError(t, err)
	assert.Equal(t, a.Strategies, b.Strategies)

	sc.Seed++
	c, err := Run(sc, modelStrategies())
	require.NoError(t, err)
	assert.NotEqual(t, a.Strategies[0].P50, c.Strategies[0].P50, "another seed, another stream")
}

// TestConservation checks at every step that no load is created or lost: the
// servers' loads add up to the rates of the open connections, and each server's
// load and connection count match the connections placed on it.
func TestConservation(t *testing.T) {
	sc := shortScenario()
	str := newStream(sc)
	for _, st := range modelStrategies() {
		t.Run(st.Name, func(t *testing.T) {
			m, err := newModel(sc, st.pipeline(), str, owners(sc, str))
			require.NoError(t, err)
			steps, failures := 0, 0
			m.onStep = func(m *model, now float64) {
				steps++
				if err := checkConserved(m.lbs[0].b); err != nil && failures < 3 {
					failures++
					t.Errorf("t=%.1fs: %v", now, err)
				}
			}
			_, err = m.run()
			require.NoError(t, err)
			assert.Equal(t, int(sc.Duration/sc.Step), steps)
		})
	}
}

func checkConserved(b *backend) error {
	load := make([]float64, len(b.servers))
	active := make([]int, len(b.servers))
	for _, d := range b.departing { // exactly the open connections
		c := b.conns[d.id]
		if !c.open {
			return errorf("closed connection %d still waits to depart", d.id)
		}
		load[c.server] += c.rate
		active[c.server]++
	}
	total := 0.0
	for i, s := range b.servers {
		total += load[i]
		if s.active != active[i] || math.Abs(s.load-load[i]) > 1e-6*math.Max(1, load[i]) {
			return errorf("server %s: %d connections / load %.6f, its connections say %d / %.6f", s.name, s.active, s.load, active[i], load[i])
		}
		if !s.up && s.active > 0 {
			return errorf("removed server %s still holds %d connections", s.name, s.active)
		}
	}
	if sum := b.serverLoad(); math.Abs(sum-total) > 1e-6*math.Max(1, total) {
		return errorf("servers carry %.6f, open connections %.6f", sum, total)
	}
	return nil
}

func TestOpenConnectionsFollowLittlesLaw(t *testing.T) {
	sc := shortScenario()
	sc.Events = nil
	str := newStream(sc)
	m, err := newModel(sc, Baselines()[0].pipeline(), str, owners(sc, str))
	require.NoError(t, err)
	var sum, n float64
	m.onStep = func(m *model, now float64) {
		if now > 60 {
			for _, s := range m.lbs[0].b.servers {
				sum += float64(s.active)
			}
			n++
		}
	}
	_, err = m.run()
	require.NoError(t, err)
	assert.InEpsilon(t, float64(sc.Connections), sum/n, 0.1, "about C connections stay open")
}

func TestOracleBeatsLeastconn(t *testing.T) {
	rep, err := Run(shortScenario(), Baselines())
	require.NoError(t, err)
	lc, or := rep.Get("leastconn"), rep.Get("oracle")
	assert.Less(t, or.P50, lc.P50)
	assert.GreaterOrEqual(t, or.P50, 1.0)
	require.NotNil(t, lc.NewServerPeakShare)
	assert.Greater(t, *lc.NewServerPeakShare, 1.0/9, "leastconn floods the new, empty server")
}

func TestMonitorRate(t *testing.T) {
	sc := DefaultScenario()
	b := newBackend(1, 1, pickLeastconn)
	b.attach(0, 100, 0)
	m := newMonitor(sc) // rate window 20 s
	for now := 0.0; now <= 60; now += 10 {
		if now == 30 {
			b.attach(0, 50, now) // load 100 → 150 at t=30
		}
		m.scrape(b, now)
	}
	ser := m.loads(b, 60, epoch)["s1"]
	require.Len(t, ser, 6)
	want := []float64{100, 100, 100, 125, 150, 150} // points at 10..60, rate over the last 20 s
	for i, p := range ser {
		assert.InDelta(t, want[i], p.Value, 1e-9, "point %d", i)
		assert.Equal(t, simTime(epoch, float64(10*(i+1))), p.Time)
	}
	m.delay = 10
	assert.Len(t, m.loads(b, 60, epoch)["s1"], 5, "the newest point is not visible yet")
}

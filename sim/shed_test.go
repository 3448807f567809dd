package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// eager sheds as much as the rules let it, to exercise the model.
func eager() weighter.ShedPolicy {
	return weighter.ShedPolicy{Above: 1.2, For: 1, MaxPerMinute: 20, MaxShare: 0.1, MinAge: 0, Cooldown: 0, Progress: 0}
}

func TestWhaleScenarioFile(t *testing.T) {
	sc, err := LoadScenario("../examples/scenarios/shed/whales.yaml")
	require.NoError(t, err)
	assert.Equal(t, WhaleScenario(), sc)
	assert.Len(t, ShedScenarios(), 4)
}

// A shedder that never finds a hot server changes nothing.
func TestShedderThatNeverShedsChangesNothing(t *testing.T) {
	sc := shortFleet()
	never := eager()
	never.Above = 1000
	pls, err := SelectPipelines(RecommendedPipeline)
	require.NoError(t, err)
	pls = append(pls, ShedPipeline("never", never))
	rep, err := RunFleet(sc, pls)
	require.NoError(t, err)
	a, b := *rep.Get(RecommendedPipeline), *rep.Get("never")
	require.NotNil(t, b.Shed)
	assert.Zero(t, b.Shed.Sheds)
	assert.Nil(t, a.Shed)
	a.Strategy, a.Default, b.Shed = "never", false, nil
	assert.Equal(t, a, b)
}

// TestShedConservation: with eager shedding on three balancers, every
// balancer's servers carry exactly its open connections at every step; shed
// clients come back within 0.1-2 s; the same seed gives the same figures.
func TestShedConservation(t *testing.T) {
	sc := shortFleet()
	pl := ShedPipeline("", eager())
	str := newStream(sc)
	m, err := newModel(sc, pl, str, owners(sc, str))
	require.NoError(t, err)
	failures := 0
	m.onStep = func(m *model, now float64) {
		for k, lb := range m.lbs {
			if err := checkConserved(lb.b); err != nil && failures < 3 {
				failures++
				t.Errorf("balancer %d t=%.1fs: %v", k, now, err)
			}
		}
		for _, r := range m.pending {
			if r.at < now-1e-9 || r.at > now+reconnectMax+1e-9 {
				failures++
				t.Errorf("t=%.1fs: reconnect at %.2f", now, r.at)
			}
		}
	}
	_, err = m.run()
	require.NoError(t, err)
	figs := m.shedFigures()
	assert.Greater(t, figs.Sheds, 10)
	assert.Len(t, figs.WhaleRecovery, 2)

	rep1, err := RunFleet(sc, []Pipeline{pl})
	require.NoError(t, err)
	rep2, err := RunFleet(sc, []Pipeline{pl})
	require.NoError(t, err)
	assert.Equal(t, rep1.Strategies, rep2.Strategies)
	assert.Equal(t, figs.Sheds, rep1.Get(pl.Name).Shed.Sheds)
}

func TestBytesInFlight(t *testing.T) {
	assert.InDelta(t, 30000, bytesInFlight(3000), 1e-9)
	assert.InDelta(t, 64<<10, bytesInFlight(10000), 1e-9)
}

func TestWhaleRecovery(t *testing.T) {
	sc := DefaultScenario()
	tr := trace{windows: []window{
		{end: 100, loads: []float64{3, 1, 1, 1}, whales: []int{0, -1}},
		{end: 110, loads: []float64{3, 1, 1, 1}, whales: []int{0, 1}}, // whale 0's server 2× mean
		{end: 120, loads: []float64{1.4, 1, 1, 1}, whales: []int{0, 1}},
	}}
	whales := []arrival{{At: 95, Life: 100}, {At: 100, Life: 15}}
	got := whaleRecovery(sc, tr, whales)
	require.Len(t, got, 2)
	require.NotNil(t, got[0])
	assert.InDelta(t, 25, *got[0], 1e-9) // the window ending at 100 began before it arrived
	require.NotNil(t, got[1])
	assert.InDelta(t, 10, *got[1], 1e-9)
	whales[1].Life = 5 // gone before a whole window
	assert.Nil(t, whaleRecovery(sc, tr, whales)[1])
}

func TestShedPipelinesAreNotInAll(t *testing.T) {
	all, err := SelectPipelines("all")
	require.NoError(t, err)
	for _, p := range all {
		assert.Nil(t, p.Shed, p.Name)
	}
	pls, err := SelectPipelines(RecommendedPipeline + ShedPipelineSuffix)
	require.NoError(t, err)
	shed := pls[len(pls)-1]
	require.NotNil(t, shed.Shed)
	assert.Equal(t, weighter.DefaultShed(), *shed.Shed)
	assert.False(t, shed.Default)
	assert.True(t, shed.FleetWide)
	_ = time.Second
}

package sim

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOmniShedBudgetAndConservation: the omniscient shedder on three
// balancers keeps every balancer's servers carrying exactly its open
// connections, never spends more than its token bucket allows, never closes a
// connection younger than its min age, and closes only on the busiest server.
func TestOmniShedBudgetAndConservation(t *testing.T) {
	sc := shortFleet()
	for _, base := range []string{"oracle", RecommendedPipeline} {
		t.Run(base, func(t *testing.T) {
			p := OmniShed{Above: 1.1, PerHour: 60, Burst: 3, MinAge: 5 * time.Second, Cooldown: time.Minute}
			str := newStream(sc)
			m, err := newModel(sc, OmniPipeline(base, p), str, owners(sc, str))
			require.NoError(t, err)
			closed := 0
			failures := 0
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
				}
			}
			// Wrap the cycle: what it closes, from where, how old.
			m.onOmni = func(m *model, now float64, lb *balancer, id int, top int) {
				closed++
				if age := now - lb.since[id]; age < p.MinAge.Seconds() {
					fail("t=%.1fs: closed a connection %.1fs old", now, age)
				}
				for i, s := range m.lbs[0].b.servers {
					if s.up && m.trueLoad(i) > m.trueLoad(top)+1e-9 {
						fail("t=%.1fs: closed on s%d, not the busiest", now, top+1)
					}
				}
				allowed := p.Burst + now*p.PerHour*float64(sc.Servers)/3600
				if float64(closed) > allowed+1e-9 {
					fail("t=%.1fs: %d closed, the budget allows %.1f", now, closed, allowed)
				}
			}
			_, err = m.run()
			require.NoError(t, err)
			assert.Greater(t, closed, 5)
			figs := m.shedFigures()
			assert.LessOrEqual(t, figs.Sheds, closed)
			assert.False(t, math.IsNaN(figs.PerHourPerServer))
		})
	}
}

// An omniscient shedder that never finds the busiest server above its
// threshold changes nothing.
func TestOmniShedThatNeverShedsChangesNothing(t *testing.T) {
	sc := shortFleet()
	rep, err := RunFleet(sc, []Pipeline{{Name: "oracle", Kind: KindOracle}, OmniPipeline("oracle", OmniShed{Above: 1000, PerHour: 6, Burst: 4})})
	require.NoError(t, err)
	a, b := *rep.Get("oracle"), *rep.Get(OmniLabel("oracle", OmniShed{Above: 1000, PerHour: 6}))
	require.NotNil(t, b.Shed)
	assert.Zero(t, b.Shed.Sheds)
	a.Strategy, b.Shed = b.Strategy, nil
	assert.Equal(t, a, b)
}

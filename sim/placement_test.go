package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// place opens n connections (rate 1, never ending) and returns the servers' names in
// the order they were picked.
func place(b *backend, n int) string {
	var seq []string
	for range n {
		before := make([]int, len(b.servers))
		for i, s := range b.servers {
			before[i] = s.picked
		}
		b.open(0, 1, 1e9, 0)
		for i, s := range b.servers {
			if s.picked != before[i] {
				seq = append(seq, s.name)
			}
		}
	}
	return strings.Join(seq, " ")
}

func TestLeastconnEqualWeightsTiesGoRoundRobin(t *testing.T) {
	b := newBackend(3, 100, pickLeastconn)
	assert.Equal(t, "s1 s2 s3 s1 s2 s3 s1", place(b, 7))
}

func TestLeastconnWeighted(t *testing.T) {
	// Weights 2 and 1. Keys (active+1)·4096/(16·w), 0 when empty. Setting s1's
	// weight requeued it behind s2, so on the empty tie s2 goes first:
	// s2 (0) → s2=512; s1 (0) → s1=256; s1 (256) → 384; s1 (384) → 512;
	// tie 512: s2 was queued first → s2=768; s1 (512) → 640; s1 (640) → 768;
	// tie 768: s2 queued first → s2.
	b := newBackend(2, 1, pickLeastconn)
	b.setWeight(0, 2)
	assert.Equal(t, "s2 s1 s1 s1 s2 s1 s1 s2", place(b, 8))
}

func TestLeastconnClosingRequeues(t *testing.T) {
	b := newBackend(2, 1, pickLeastconn)
	place(b, 4) // s1 s2 s1 s2: 2 each
	b.detach(0, 1, 0)
	assert.Equal(t, "s1", place(b, 1), "s1 has fewer connections")
	// Equal again (2, 2); s2 was requeued before s1 took the last one.
	assert.Equal(t, "s2 s1", place(b, 2))
}

func TestWeightZeroGetsNothing(t *testing.T) {
	for name, pick := range map[string]picker{"leastconn": pickLeastconn, "roundrobin": pickRoundrobin} {
		t.Run(name, func(t *testing.T) {
			b := newBackend(3, 1, pick)
			b.setWeight(0, 0) // empty, yet drained
			assert.Equal(t, "s2 s3 s2 s3", place(b, 4))
			b.setWeight(1, 0)
			b.setWeight(2, 0)
			assert.Equal(t, -1, pick(b.servers), "no server with a weight")
		})
	}
}

func TestSmoothRoundrobin(t *testing.T) {
	b := newBackend(3, 1, pickRoundrobin)
	b.setWeight(0, 5)
	got := strings.NewReplacer("s1", "a", "s2", "b", "s3", "c").Replace(place(b, 14))
	assert.Equal(t, "a a b a c a a a a b a c a a", got)
}

// TestOracleTakesLeastTrueLoad: the oracle places on the server of least
// true load: its cost × what every balancer puts on it.
func TestOracleTakesLeastTrueLoad(t *testing.T) {
	sc := DefaultScenario()
	sc.Servers, sc.Events, sc.Duration = 3, nil, 10*time.Minute
	sc.Balancers = []float64{0.5, 0.5}
	sc.Costs = map[string]float64{"s1": 0.2}
	str := newStream(sc)
	m, err := newModel(sc, Pipeline{Name: "oracle", Kind: KindOracle}, str, owners(sc, str))
	require.NoError(t, err)
	a, b := m.lbs[0].b, m.lbs[1].b
	a.attach(0, 10, 0)  // s1: 0.2 × 10 = 2
	b.attach(1, 2.5, 0) // s2: 2.5
	a.attach(2, 2, 0)   // s3: 2 here + 1 on the other balancer = 3
	b.attach(2, 1, 0)
	require.Equal(t, 0, a.pick(a.servers), "s1 carries the most datapoints here and the least load")
	a.servers[0].up, b.servers[0].up = false, false
	assert.Equal(t, 1, b.pick(b.servers), "a removed server takes nothing; s3's load on both balancers counts")
}

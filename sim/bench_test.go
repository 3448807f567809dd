package sim

import (
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// BenchmarkSimulate measures the model's speed with the real weighter in the loop
// (default scenario, default policy, one strategy) in simulated seconds per wall second.
func BenchmarkSimulate(b *testing.B) {
	sc := DefaultScenario()
	str := newStream(sc)
	own := owners(sc, str)
	pl := WeighterStrategy(weighter.DefaultPolicy()).pipeline()
	b.ResetTimer()
	for b.Loop() {
		m, err := newModel(sc, pl, str, own)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.run(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(sc.Duration.Seconds()*float64(b.N)/b.Elapsed().Seconds(), "sim-s/s")
}

// BenchmarkDefaultComparison is what haproxy-weighter-sim does without arguments.
func BenchmarkDefaultComparison(b *testing.B) {
	for b.Loop() {
		if _, err := Run(DefaultScenario(), DefaultStrategies()); err != nil {
			b.Fatal(err)
		}
	}
}

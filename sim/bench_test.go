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
	st := WeighterStrategy(weighter.DefaultPolicy())
	b.ResetTimer()
	for b.Loop() {
		r, err := newRunner(sc, st, str)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.run(); err != nil {
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

package testenv

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauge is the value of the gauge name in reg whose labels include labels
// (the first such series), NaN when there is none: a series that must be
// gone is told from one at 0.
func Gauge(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metric
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	return math.NaN()
}

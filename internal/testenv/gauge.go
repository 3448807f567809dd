package testenv

import (
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Series is every series of the family name in reg whose labels include
// labels (every series of it when labels is empty), in Gather's order.
func Series(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				out = append(out, m)
			}
		}
	}
	return out
}

// Labels is a series' labels by name.
func Labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// hasLabels says whether m carries every one of labels.
func hasLabels(m *dto.Metric, labels map[string]string) bool {
	got := Labels(m)
	for k, v := range labels {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Gauge is the value of the gauge name in reg whose labels include labels
// (the first such series), NaN when there is none: a series that must be
// gone is told from one at 0.
func Gauge(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	if s := Series(t, reg, name, labels); len(s) > 0 {
		return s[0].GetGauge().GetValue()
	}
	return math.NaN()
}

// Counter is the sum of the counters name in reg whose labels include
// labels: one series' value when labels name it whole, all results' when
// they leave "result" out; 0 when there is none, as for a counter never
// incremented.
func Counter(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	sum := 0.0
	for _, m := range Series(t, reg, name, labels) {
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// Exposition is reg's metrics as /metrics shows them (the text format).
func Exposition(t testing.TB, reg prometheus.Gatherer) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatalf("exposition of %s: %v", mf.GetName(), err)
		}
	}
	return b.String()
}

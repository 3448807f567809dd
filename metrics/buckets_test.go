package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestCycleDurationBuckets: the cycle durations that matter must each fall
// in a finite bucket of its own, or histogram_quantile cannot tell them
// apart. A cycle that runs into its timeout takes the timeout and a little
// more; the timeout is the interval unless set, and intervals of 10 s, 30 s
// (examples/config/ipvs.yaml) and 60 s (one Graphite step) are common. The
// fast end is a real IPVS cycle (3.4 ms in the user-mode Linux kernel test).
func TestCycleDurationBuckets(t *testing.T) {
	durations := []time.Duration{3400 * time.Microsecond, 10*time.Second + 50*time.Millisecond,
		30*time.Second + 50*time.Millisecond, 60*time.Second + 50*time.Millisecond}
	reg := prometheus.NewRegistry()
	m := New(reg)
	bucketOf := map[float64]time.Duration{}
	for i, d := range durations {
		be := string(rune('a' + i))
		m.Observe(weighter.Cycle{Backend: be, Result: weighter.ResultTargetError, Duration: d})
		h := histogramOf(t, reg, be)
		upper := -1.0
		for _, b := range h.GetBucket() {
			if b.GetCumulativeCount() == 1 {
				upper = b.GetUpperBound()
				break
			}
		}
		if upper < 0 {
			t.Errorf("a %s cycle is only counted in +Inf", d)
			continue
		}
		if other, dup := bucketOf[upper]; dup {
			t.Errorf("a %s cycle and a %s cycle share the bucket le=%g", other, d, upper)
		}
		bucketOf[upper] = d
	}
}

func histogramOf(t *testing.T, reg *prometheus.Registry, backend string) *dto.Histogram {
	t.Helper()
	s := testenv.Series(t, reg, "haproxy_weighter_cycle_duration_seconds", map[string]string{"backend": backend})
	if len(s) == 0 {
		t.Fatalf("no cycle_duration_seconds histogram for backend %q", backend)
	}
	return s[0].GetHistogram()
}

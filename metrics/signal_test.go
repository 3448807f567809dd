package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func TestSignalMetrics(t *testing.T) {
	m := New(prometheus.NewRegistry())
	m.SetFastState("be", weighter.FastStarting)
	if v := testutil.ToFloat64(m.fastState.WithLabelValues("be", "starting")); v != 1 {
		t.Errorf("starting %v", v)
	}
	cal := &weighter.Signal{Pipeline: weighter.PipelineCalibrated, Fast: weighter.FastLive, Calibrate: true,
		Streams: 40, FastAge: 500 * time.Millisecond, ExternalAge: 25 * time.Second, Uncalibrated: 1,
		Servers: map[string]weighter.FastInput{"s1": {Factor: 1.5, Calibrated: true}, "s2": {Factor: 1}}}
	m.Observe(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Signal: cal})
	for name, want := range map[string]float64{
		"live": 1, "starting": 0, "dead": 0,
	} {
		if v := testutil.ToFloat64(m.fastState.WithLabelValues("be", name)); v != want {
			t.Errorf("state %s = %v", name, v)
		}
	}
	if v := testutil.ToFloat64(m.factor.WithLabelValues("be", "s1")); v != 1.5 {
		t.Errorf("factor %v", v)
	}
	if v := testutil.ToFloat64(m.externalAge.WithLabelValues("be")); v != 25 {
		t.Errorf("external age %v", v)
	}
	if v := testutil.ToFloat64(m.uncalibrated.WithLabelValues("be")); v != 1 {
		t.Errorf("uncalibrated %v", v)
	}
	if v := testutil.ToFloat64(m.fastStreams.WithLabelValues("be")); v != 40 {
		t.Errorf("streams %v", v)
	}
	if v := testutil.ToFloat64(m.fastSkipped.WithLabelValues("be")); v != 0 {
		t.Errorf("skipped %v", v)
	}
	// A dump that left two unreadable streams out says so; a read of the
	// socket table is no dump and drops both series.
	skipping := *cal
	skipping.Skipped = 2
	m.Observe(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Signal: &skipping})
	if v := testutil.ToFloat64(m.fastSkipped.WithLabelValues("be")); v != 2 {
		t.Errorf("skipped %v", v)
	}
	kernel := *cal
	kernel.Streams, kernel.Reader = 0, "kernel"
	m.Observe(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Signal: &kernel})
	if n := testutil.CollectAndCount(m.fastSkipped); n != 0 {
		t.Errorf("%d skipped series left on the kernel path", n)
	}

	// The fast signal dies: the source weighs alone, and no factor stays exported.
	m.Observe(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Signal: &weighter.Signal{Pipeline: weighter.PipelineExternal,
		Fast: weighter.FastDead, Calibrate: true, ExternalAge: -1}})
	if v := testutil.ToFloat64(m.fastState.WithLabelValues("be", "dead")); v != 1 {
		t.Errorf("dead %v", v)
	}
	if n := testutil.CollectAndCount(m.factor); n != 0 {
		t.Errorf("%d factors left", n)
	}
	m.Forget("be")
	if n := testutil.CollectAndCount(m.fastState); n != 0 {
		t.Errorf("%d states left", n)
	}
}

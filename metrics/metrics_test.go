package metrics

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/version"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func TestObserve(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Init("be")
	at := time.Unix(1_800_000_000, 0)
	m.Observe(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Duration: 2 * time.Second, Applied: true,
		Written: []weighter.Change{{Server: "s1", Weight: 200}},
		Plan: weighter.Plan{Time: at, Imbalance: 1.5, RareArrivals: true, Settling: true, Servers: []weighter.ServerPlan{
			{Server: "s1", Load: 10, Current: 100, New: 200, Action: weighter.ActionSet},
			{Server: "s2", Load: math.NaN(), Current: 100, New: 100, Action: weighter.ActionKeep},
		}}})
	// A failed cycle counts but does not touch weights and loads.
	m.Observe(weighter.Cycle{Backend: "be", Result: weighter.ResultSourceError, Err: errors.New("down"), Plan: weighter.Plan{Time: at}})
	want := `
# HELP haproxy_weighter_server_weight Weight of the server in HAProxy (or IPVS) after the last cycle.
# TYPE haproxy_weighter_server_weight gauge
haproxy_weighter_server_weight{backend="be",server="s1"} 200
haproxy_weighter_server_weight{backend="be",server="s2"} 100
# HELP haproxy_weighter_server_load Aggregated load of the server used by the last cycle.
# TYPE haproxy_weighter_server_load gauge
haproxy_weighter_server_load{backend="be",server="s1"} 10
# HELP haproxy_weighter_backend_imbalance Highest server load divided by the mean load of the backend, in the last cycle.
# TYPE haproxy_weighter_backend_imbalance gauge
haproxy_weighter_backend_imbalance{backend="be"} 1.5
# HELP haproxy_weighter_rare_arrivals 1 while new connections are rare on the backend and the run bound spreads a burst over run_rare_spread servers (run_rare), else 0.
# TYPE haproxy_weighter_rare_arrivals gauge
haproxy_weighter_rare_arrivals{backend="be"} 1
# HELP haproxy_weighter_settling 1 while the configured weights HAProxy reset to are kept until the clients have reconnected (after a restart or reload), else 0.
# TYPE haproxy_weighter_settling gauge
haproxy_weighter_settling{backend="be"} 1
# HELP haproxy_weighter_weight_writes_total Server weights written (one per server and change).
# TYPE haproxy_weighter_weight_writes_total counter
haproxy_weighter_weight_writes_total{backend="be"} 1
# HELP haproxy_weighter_last_success_timestamp_seconds Unix time of the end of the last cycle with result ok.
# TYPE haproxy_weighter_last_success_timestamp_seconds gauge
haproxy_weighter_last_success_timestamp_seconds{backend="be"} 1.800000002e+09
`
	names := []string{"haproxy_weighter_server_weight", "haproxy_weighter_server_load", "haproxy_weighter_backend_imbalance",
		"haproxy_weighter_rare_arrivals", "haproxy_weighter_settling", "haproxy_weighter_weight_writes_total", "haproxy_weighter_last_success_timestamp_seconds"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	for result, n := range map[string]float64{"ok": 1, "source_error": 1, "haproxy_error": 0, "skipped_coverage": 0} {
		if got := testutil.ToFloat64(m.cycles.WithLabelValues("be", result)); got != n {
			t.Errorf("cycles_total{result=%q} = %v, want %v", result, got, n)
		}
	}
	m.Forget("be")
	if n, _ := testutil.GatherAndCount(reg, names...); n != 0 {
		t.Errorf("%d series left after Forget", n)
	}
}

// TestBuildInfo: the registry carries haproxy_weighter_build_info with the
// version prometheus/common/version holds (the command line sets it).
func TestBuildInfo(t *testing.T) {
	old := version.Version
	version.Version = "1.2.3"
	t.Cleanup(func() { version.Version = old })
	reg := prometheus.NewRegistry()
	New(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "haproxy_weighter_build_info" {
			continue
		}
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["version"] != "1.2.3" || labels["goversion"] == "" || f.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Errorf("build_info %v = %v", labels, f.GetMetric()[0].GetGauge().GetValue())
		}
		return
	}
	t.Error("no haproxy_weighter_build_info")
}

package metrics

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestPromtoolLint runs Prometheus' own linter (`promtool check metrics`:
// _total on counters, base units, snake_case, help text) over every metric
// family this package exports, each with a series.
func TestPromtoolLint(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (install it: apt-get install prometheus): %v", err)
	}
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Init("be")
	m.Observe(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Duration: time.Second, Written: []weighter.Change{{Server: "s1", Weight: 4}},
		Plan: weighter.Plan{Time: time.Unix(1_800_000_000, 0), Imbalance: 1.2, Servers: []weighter.ServerPlan{{Server: "s1", Load: 1, Current: 3}}}})
	m.Observe(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Signal: &weighter.Signal{Pipeline: weighter.PipelineCalibrated,
		Fast: weighter.FastLive, Calibrate: true, Streams: 12, FastAge: time.Second, ExternalAge: 20 * time.Second,
		Servers: map[string]weighter.FastInput{"s1": {Local: 10, Sessions: 1, Factor: 1.2, Calibrated: true}}, Uncalibrated: 0}})
	m.SetDryRun("be", true)
	m.AddDryRunWrites("be", 2)
	m.Observe(shedCycle())
	m.Observe(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Applied: true, Plan: weighter.Plan{Servers: []weighter.ServerPlan{{Server: "s1"}},
		Pins: &weighter.PinPlan{Pins: []weighter.Pin{{Client: "10.0.0.1", Server: "s1"}}, Changes: weighter.PinChanges{Set: []weighter.Pin{{Client: "10.0.0.1", Server: "s1"}}},
			Projected: 1.1}}, Signal: &weighter.Signal{Clients: []weighter.Client{{Addr: "10.0.0.1", Rate: 2000, Conns: 1}}}})
	m.SetClients("be", true, 10, 1)
	m.SetReady(true)
	m.SetReloadSuccess(true)
	m.WatchSockets(func() []SocketState {
		return []SocketState{{Socket: "/run/haproxy/admin.sock", Backends: []string{"be"}, Known: true, Up: true}}
	})
	m.WatchAddresses(func() []AddressState {
		return []AddressState{{Backend: "be", Servers: map[string]string{"s1": "10.0.0.1:80"}, ByAddress: true, Ambiguous: 1}}
	})
	text := testenv.Exposition(t, reg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("promtool check metrics: %v", err)
		}
		t.Errorf("promtool check metrics found problems:\n%s", out)
	}
}

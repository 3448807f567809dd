package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// memTarget and memSource stand in for HAProxy and a load source, so the
// cycles below are what weighter.RunCycle really produces.
type memTarget struct{ servers []weighter.ServerState }

func (t *memTarget) Servers(context.Context) ([]weighter.ServerState, error) { return t.servers, nil }

func (t *memTarget) SetWeights(context.Context, []weighter.Change) error { return nil }

type memSource struct{ loads weighter.Loads }

func (s *memSource) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	return s.loads, nil
}

func newMemBackend(t *testing.T) (*weighter.Weigher, *memTarget, *memSource) {
	t.Helper()
	ctl, err := weighter.NewController(weighter.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	tg := &memTarget{}
	src := &memSource{}
	return &weighter.Weigher{Name: "be", Source: src, Target: tg, Controller: ctl}, tg, src
}

func up(name string, weight int) weighter.ServerState {
	return weighter.ServerState{Name: name, Weight: weight, InitialWeight: weight,
		Admin: weighter.AdminReady, Operational: "up"}
}

// TestObserveDropsServersThatLeft: the servers a backend no longer has must
// not be exported, also when it has none left (every server removed from the
// HAProxy backend or IPVS service), and an imbalance that cannot be computed
// (no valid load) must not be exported as 0, a value max/mean never takes.
func TestObserveDropsServersThatLeft(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	b, tg, src := newMemBackend(t)
	now := time.Unix(1_800_000_000, 0)
	pts := func(v float64) weighter.Series { return weighter.Series{{Time: now, Value: v}} }

	tg.servers = []weighter.ServerState{up("s1", 100), up("s2", 100), up("s3", 100)}
	src.loads = weighter.Loads{"s1": pts(10), "s2": pts(20), "s3": pts(30)}
	c := weighter.RunCycle(context.Background(), b, now, false)
	if c.Result != weighter.ResultOK {
		t.Fatalf("first cycle: %s %v", c.Result, c.Err)
	}
	m.Observe(c)
	names := []string{"haproxy_weighter_server_weight", "haproxy_weighter_server_load", "haproxy_weighter_backend_imbalance"}
	if n, _ := testutil.GatherAndCount(reg, names...); n != 7 {
		t.Fatalf("after the first cycle: %d series, want 3 weights, 3 loads, 1 imbalance", n)
	}

	// s3 left; s1 and s2 have no data: the plan holds, imbalance undefined.
	tg.servers = tg.servers[:2]
	src.loads = weighter.Loads{}
	c = weighter.RunCycle(context.Background(), b, now.Add(time.Minute), false)
	if c.Result != weighter.ResultSkippedCoverage {
		t.Fatalf("second cycle: %s %v", c.Result, c.Err)
	}
	m.Observe(c)
	want := `
# HELP haproxy_weighter_server_weight Weight of the server in HAProxy (or IPVS) after the last cycle.
# TYPE haproxy_weighter_server_weight gauge
haproxy_weighter_server_weight{backend="be",server="s1"} 100
haproxy_weighter_server_weight{backend="be",server="s2"} 100
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Errorf("after s3 left and the loads went missing: %v", err)
	}

	// Every server left.
	tg.servers = nil
	c = weighter.RunCycle(context.Background(), b, now.Add(2*time.Minute), false)
	if c.Result != weighter.ResultSkippedCoverage {
		t.Fatalf("third cycle: %s %v", c.Result, c.Err)
	}
	m.Observe(c)
	if n, _ := testutil.GatherAndCount(reg, names...); n != 0 {
		t.Errorf("backend without servers: %d weight/load/imbalance series left, want 0", n)
	}
}

package metrics

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// pinMetricNames are the series pinning exports per backend.
var pinMetricNames = []string{"haproxy_weighter_pins", "haproxy_weighter_pinned_clients", "haproxy_weighter_pinned_load",
	"haproxy_weighter_pin_writes_total", "haproxy_weighter_pin_storms_total", "haproxy_weighter_pin_table", "haproxy_weighter_pin_projected_imbalance"}

// clientSource is a fast signal that lists clients: each server's load is
// its bytes/s (one connection each), and the clients are the socket
// table's.
type clientSource struct {
	loads   map[string]float64
	clients []weighter.Client
	now     time.Time
}

func (s *clientSource) Fetch(ctx context.Context, servers []weighter.ServerState) (weighter.Loads, error) {
	l, _, err := s.FetchSignal(ctx, servers)
	return l, err
}

func (s *clientSource) FetchSignal(context.Context, []weighter.ServerState) (weighter.Loads, *weighter.Signal, error) {
	sig := &weighter.Signal{Pipeline: weighter.PipelineFast, Fast: weighter.FastLive, FastAt: s.now,
		Servers: map[string]weighter.FastInput{}, Clients: s.clients}
	loads := weighter.Loads{}
	for name, v := range s.loads {
		loads[name] = weighter.Series{{Time: s.now, Value: v}}
		sig.Servers[name] = weighter.FastInput{Local: v, Sessions: 1, Factor: 1}
	}
	return loads, sig, nil
}

// pinnedWorld is a real HAProxy with be_pin (a pin table of room for 2)
// and be_plain (no table), each weighed by a Weigher that pins: s1 carries
// two 2,000 B/s relays and a 5 B/s client, s2 and s3 little.
func pinnedWorld(t *testing.T) (pin, plain *weighter.Weigher, tgt *haproxy.RuntimeBackend) {
	t.Helper()
	srv := func() string { return testenv.StartDiscardServer(t) }
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
backend be_pin
  balance leastconn
  stick-table type ip size 2 expire 2h
  stick match src
  server s1 %s
  server s2 %s
  server s3 %s
backend be_plain
  balance leastconn
  server s1 %s
  server s2 %s
`, srv(), srv(), srv(), srv(), srv()))
	client, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	weigher := func(backend string, loads map[string]float64) *weighter.Weigher {
		ctl, err := weighter.NewController(weighter.DefaultPolicy())
		require.NoError(t, err)
		pn, err := weighter.NewPinner(weighter.DefaultPin())
		require.NoError(t, err)
		src := &clientSource{loads: loads, now: time.Now(), clients: []weighter.Client{
			{Addr: "10.0.0.1", Rate: 2000, Conns: 1}, {Addr: "10.0.0.2", Rate: 2000, Conns: 1}, {Addr: "10.0.0.9", Rate: 5, Conns: 1}}}
		return &weighter.Weigher{Name: backend, Source: src, Target: client.Backend(backend), Controller: ctl, Pinner: pn}
	}
	pin = weigher("be_pin", map[string]float64{"s1": 4005, "s2": 200, "s3": 200})
	plain = weigher("be_plain", map[string]float64{"s1": 4005, "s2": 200})
	return pin, plain, client.Backend("be_pin")
}

// TestPinMetricsRealHAProxy: a backend whose heavy clients are pinned
// through HAProxy's stick table exports the pins in force, per server
// with their clients' rates, the entries written and the table's state
// (full once its two entries are used); a backend without a table says
// missing; a dry run's pins are the plan's and count no write.
func TestPinMetricsRealHAProxy(t *testing.T) {
	pin, plain, tgt := pinnedWorld(t)
	reg := prometheus.NewRegistry()
	m := New(reg)
	ctx := testenv.Context(t, 30*time.Second)

	c := weighter.RunCycle(ctx, pin, time.Now(), true)
	require.Equal(t, weighter.ResultOK, c.Result, "%v", c.Err)
	require.NotNil(t, c.Plan.Pins)
	require.Len(t, c.Plan.Pins.Pins, 2, "%+v", c.Plan.Pins)
	m.Observe(c)
	table, err := tgt.Pins(ctx)
	require.NoError(t, err)
	require.Len(t, table.Pins, 2, "HAProxy's table after the cycle: %+v", table)
	pinnedTo := map[string]float64{"s1": 0, "s2": 0, "s3": 0}
	for _, p := range table.Pins {
		pinnedTo[p.Server]++
	}
	want := "# HELP haproxy_weighter_pinned_clients Clients pinned to the server after the last cycle.\n" +
		"# TYPE haproxy_weighter_pinned_clients gauge\n"
	wantLoad := "# HELP haproxy_weighter_pinned_load Sum of the rates of the clients pinned to the server, in the fast signal's unit (bytes/s), " +
		"as the last cycle's read measured them (a client not measured counts 0).\n# TYPE haproxy_weighter_pinned_load gauge\n"
	for _, s := range []string{"s1", "s2", "s3"} {
		want += fmt.Sprintf("haproxy_weighter_pinned_clients{backend=\"be_pin\",server=%q} %g\n", s, pinnedTo[s])
		wantLoad += fmt.Sprintf("haproxy_weighter_pinned_load{backend=\"be_pin\",server=%q} %g\n", s, 2000*pinnedTo[s])
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want+wantLoad+`
# HELP haproxy_weighter_pin_table 1 for the state of the backend's pin table: ok, missing (no stick table matched on the source: nothing is pinned), full (no new pin), error (not read: the pins stay as they were).
# TYPE haproxy_weighter_pin_table gauge
haproxy_weighter_pin_table{backend="be_pin",state="error"} 0
haproxy_weighter_pin_table{backend="be_pin",state="full"} 0
haproxy_weighter_pin_table{backend="be_pin",state="missing"} 0
haproxy_weighter_pin_table{backend="be_pin",state="ok"} 1
# HELP haproxy_weighter_pin_writes_total Stick-table entries written to HAProxy, by op: set (a pin created or moved), clear (a pin withdrawn).
# TYPE haproxy_weighter_pin_writes_total counter
haproxy_weighter_pin_writes_total{backend="be_pin",op="clear"} 0
haproxy_weighter_pin_writes_total{backend="be_pin",op="set"} 2
# HELP haproxy_weighter_pins Clients pinned to a server through the backend's stick table after the last cycle (in a dry run: the pins the plan wants).
# TYPE haproxy_weighter_pins gauge
haproxy_weighter_pins{backend="be_pin"} 2
`), "haproxy_weighter_pins", "haproxy_weighter_pinned_clients", "haproxy_weighter_pinned_load",
		"haproxy_weighter_pin_writes_total", "haproxy_weighter_pin_table"))
	assert.Zero(t, pinnedTo["s1"], "the relays pinned away from the hot server")
	assert.InDelta(t, c.Plan.Pins.Projected, testutil.ToFloat64(m.pins.projected.WithLabelValues("be_pin")), 1e-9)
	assert.Less(t, c.Plan.Pins.Projected, c.Plan.Pins.Imbalance, "the pins lower the projected max/mean")

	// The table's two entries are used: full. Nothing new is written.
	c = weighter.RunCycle(ctx, pin, time.Now(), true)
	require.Equal(t, weighter.ResultOK, c.Result, "%v", c.Err)
	require.True(t, c.Plan.Pins.Full, "%+v", c.Plan.Pins)
	m.Observe(c)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.pins.table.WithLabelValues("be_pin", "full")))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.pins.table.WithLabelValues("be_pin", "ok")))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.pins.writes.WithLabelValues("be_pin", "set")), "no write counted twice")

	// No table: missing, nothing pinned; a dry run counts no write.
	c = weighter.RunCycle(ctx, plain, time.Now(), false)
	require.Equal(t, weighter.ResultOK, c.Result, "%v", c.Err)
	m.Observe(c)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.pins.table.WithLabelValues("be_plain", "missing")))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.pins.pins.WithLabelValues("be_plain")))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.pins.writes.WithLabelValues("be_plain", "set")))
	n, err := testutil.GatherAndCount(reg, "haproxy_weighter_pin_projected_imbalance")
	require.NoError(t, err)
	assert.Zero(t, n, "no placement (be_pin full, be_plain without a table): no projected max/mean, not 0")
}

// TestPinMetricsDryRunAndErrors: a dry run exports the pins its plan wants
// and counts no write; a failed write counts none; a table that could not
// be read says error and keeps the pins as planned.
func TestPinMetricsDryRunAndErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	cycle := func(result string, applied bool, p weighter.PinPlan) weighter.Cycle {
		return weighter.Cycle{Backend: "be", Result: result, Applied: applied, Plan: weighter.Plan{
			Servers: []weighter.ServerPlan{{Server: "s1"}, {Server: "s2"}}, Pins: &p},
			Signal: &weighter.Signal{Clients: []weighter.Client{{Addr: "10.0.0.1", Rate: 1500, Conns: 2}, {Addr: "10.0.0.1", Rate: 700}}}}
	}
	set := weighter.PinPlan{Pins: []weighter.Pin{{Client: "10.0.0.1", Server: "s2"}, {Client: "10.0.0.3", Server: "s2"}},
		Changes: weighter.PinChanges{Set: []weighter.Pin{{Client: "10.0.0.1", Server: "s2"}}, Clear: []string{"10.0.0.4"}}, Projected: 1.1}
	m.Observe(cycle(weighter.ResultOK, false, set))
	m.Observe(cycle(weighter.ResultTargetError, true, set))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.pins.writes.WithLabelValues("be", "set")), "a dry run and a failed batch wrote nothing")
	assert.Equal(t, 2.0, testutil.ToFloat64(m.pins.pins.WithLabelValues("be")))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.pins.clients.WithLabelValues("be", "s2")))
	assert.Equal(t, 1500.0, testutil.ToFloat64(m.pins.load.WithLabelValues("be", "s2")), "10.0.0.1's heaviest entry; 10.0.0.3 not measured")
	m.Observe(cycle(weighter.ResultSkippedCoverage, true, set))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.pins.writes.WithLabelValues("be", "set")), "a held cycle writes its pins")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.pins.writes.WithLabelValues("be", "clear")))
	assert.Zero(t, testutil.ToFloat64(m.pins.storms.WithLabelValues("be")))
	storm := set
	storm.Storm, storm.StormBegan = 2, true
	m.Observe(cycle(weighter.ResultOK, false, storm))
	m.Observe(cycle(weighter.ResultTargetError, true, storm))
	assert.Zero(t, testutil.ToFloat64(m.pins.storms.WithLabelValues("be")), "a storm's pins not written: no storm counted")
	m.Observe(cycle(weighter.ResultSkippedCoverage, true, storm))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.pins.storms.WithLabelValues("be")), "a storm placed under the coverage guard")

	unread := weighter.PinPlan{Pins: set.Pins, TableErr: "show table: timeout"}
	m.Observe(cycle(weighter.ResultOK, true, unread))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.pins.table.WithLabelValues("be", "error")))
	n, err := testutil.GatherAndCount(reg, "haproxy_weighter_pin_projected_imbalance")
	require.NoError(t, err)
	assert.Zero(t, n, "no projection: no series, not 0")
}

// TestPinMetricsGoWithTheirServerAndBackend: a server that left takes its
// pin series with it; a backend that no longer pins (a reload turned it
// off) has none, though a failed read keeps the last; a backend a reload
// removed has none at all, its clients included.
func TestPinMetricsGoWithTheirServerAndBackend(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	cycle := func(p *weighter.PinPlan, result string, servers ...string) weighter.Cycle {
		c := weighter.Cycle{Backend: "be", Result: result, Applied: true, Plan: weighter.Plan{Pins: p}}
		for _, s := range servers {
			c.Plan.Servers = append(c.Plan.Servers, weighter.ServerPlan{Server: s})
		}
		return c
	}
	p := &weighter.PinPlan{Pins: []weighter.Pin{{Client: "10.0.0.1", Server: "old"}}, Projected: 1.2}
	m.Observe(cycle(p, weighter.ResultOK, "s1", "old"))
	m.SetClients("be", true, 120, 3)
	m.Observe(cycle(&weighter.PinPlan{Projected: 1.2}, weighter.ResultOK, "s1", "new"))
	want := `
# HELP haproxy_weighter_pinned_clients Clients pinned to the server after the last cycle.
# TYPE haproxy_weighter_pinned_clients gauge
haproxy_weighter_pinned_clients{backend="be",server="new"} 0
haproxy_weighter_pinned_clients{backend="be",server="s1"} 0
# HELP haproxy_weighter_clients Client source addresses of a pinning backend in the newest socket table read: tracked (each with its rate: pinning chooses among them), untracked (beyond the bound: never pinned).
# TYPE haproxy_weighter_clients gauge
haproxy_weighter_clients{backend="be",state="tracked"} 120
haproxy_weighter_clients{backend="be",state="untracked"} 3
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "haproxy_weighter_pinned_clients", "haproxy_weighter_clients"))
	count := func() int {
		n, err := testutil.GatherAndCount(reg, pinMetricNames...)
		require.NoError(t, err)
		return n
	}
	// pins, pinned_clients and pinned_load (2 servers each), writes (set,
	// clear), storms, table (4 states), projected.
	assert.Equal(t, 1+2+2+2+1+4+1, count())

	m.Observe(cycle(nil, weighter.ResultSourceError, "s1", "new")) // no pin plan: a failed read
	assert.Equal(t, 13, count(), "a failed read keeps the last")
	m.Observe(cycle(nil, weighter.ResultOK, "s1", "new"))
	assert.Zero(t, count(), "a backend that does not pin")

	m.Observe(cycle(p, weighter.ResultOK, "s1", "old"))
	m.Forget("be")
	assert.Zero(t, count(), "after Forget")
	n, err := testutil.GatherAndCount(reg, "haproxy_weighter_clients")
	require.NoError(t, err)
	assert.Zero(t, n, "the clients after Forget")

	m.SetClients("be", true, 1, 0)
	m.SetClients("be", false, 0, 0)
	n, err = testutil.GatherAndCount(reg, "haproxy_weighter_clients")
	require.NoError(t, err)
	assert.Zero(t, n, "clients not read: no series")
}

package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// shedCycle is a cycle that closed one session on s1, found one gone and
// failed to close one.
func shedCycle() weighter.Cycle {
	sh := func(id, server string, rate float64) weighter.Shed {
		return weighter.Shed{Session: weighter.ShedSession{ID: id, Serial: 1, Server: server, Client: "10.0.0.7:5000", Age: time.Minute, Rate: rate}}
	}
	return weighter.Cycle{Backend: "be", Result: weighter.ResultTargetError, Applied: true, Sheds: []weighter.ShedResult{
		{Shed: sh("0x1", "s1", 3100), Outcome: weighter.ShedClosed},
		{Shed: sh("0x2", "s1", 2000), Outcome: weighter.ShedGone, Err: weighter.ErrSessionGone},
		{Shed: sh("0x3", "s2", 1000), Outcome: weighter.ShedFailed, Err: errors.New("socket closed")},
	}}
}

func TestShedMetricsCountClosedSessionsOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Observe(shedCycle())
	m.Observe(shedCycle())
	want := `
# HELP haproxy_weighter_sessions_shed_rate_bytes_per_second_total Sum of the measured rates (bytes/s) of the sessions shed: the traffic moved off each server, as it was at each shed (the clients reconnect and HAProxy places them again).
# TYPE haproxy_weighter_sessions_shed_rate_bytes_per_second_total counter
haproxy_weighter_sessions_shed_rate_bytes_per_second_total{backend="be",server="s1"} 6200
# HELP haproxy_weighter_sessions_shed_total Sessions closed by session shedding (shed:), by the server they were closed on.
# TYPE haproxy_weighter_sessions_shed_total counter
haproxy_weighter_sessions_shed_total{backend="be",server="s1"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"haproxy_weighter_sessions_shed_total", "haproxy_weighter_sessions_shed_rate_bytes_per_second_total"); err != nil {
		t.Error(err)
	}
	m.Forget("be")
	if n, err := testutil.GatherAndCount(reg, "haproxy_weighter_sessions_shed_total"); err != nil || n != 0 {
		t.Errorf("after Forget: %d series, %v", n, err)
	}
}

func TestShedMetricsStartAtZeroForASheddingBackend(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Observe(weighter.Cycle{Backend: "plain", Result: weighter.ResultOK, Plan: weighter.Plan{Servers: []weighter.ServerPlan{{Server: "s1"}}}})
	m.Observe(weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Plan: weighter.Plan{Servers: []weighter.ServerPlan{{Server: "s1"}, {Server: "s2"}},
		Shed: &weighter.ShedPlan{Reason: "no server above 1.75× mean"}}})
	want := `
# HELP haproxy_weighter_sessions_shed_total Sessions closed by session shedding (shed:), by the server they were closed on.
# TYPE haproxy_weighter_sessions_shed_total counter
haproxy_weighter_sessions_shed_total{backend="be",server="s1"} 0
haproxy_weighter_sessions_shed_total{backend="be",server="s2"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "haproxy_weighter_sessions_shed_total"); err != nil {
		t.Error(err)
	}
}

// A server that leaves the backend (HAProxy reload, service discovery) takes
// its shed series with it, as its weight and load: over months of servers
// coming and going they would otherwise pile up.
func TestShedMetricsOfAServerThatLeftGo(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	cycle := func(servers ...string) weighter.Cycle {
		c := weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Applied: true, Plan: weighter.Plan{Shed: &weighter.ShedPlan{}}}
		for _, s := range servers {
			c.Plan.Servers = append(c.Plan.Servers, weighter.ServerPlan{Server: s})
		}
		return c
	}
	closed := cycle("s1", "old")
	closed.Sheds = []weighter.ShedResult{{Shed: weighter.Shed{Session: weighter.ShedSession{ID: "0x1", Serial: 1, Server: "old", Client: "10.0.0.7:5000", Rate: 100}}, Outcome: weighter.ShedClosed}}
	m.Observe(closed)
	m.Observe(cycle("s1", "new"))
	want := `
# HELP haproxy_weighter_sessions_shed_total Sessions closed by session shedding (shed:), by the server they were closed on.
# TYPE haproxy_weighter_sessions_shed_total counter
haproxy_weighter_sessions_shed_total{backend="be",server="new"} 0
haproxy_weighter_sessions_shed_total{backend="be",server="s1"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "haproxy_weighter_sessions_shed_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "haproxy_weighter_sessions_shed_rate_bytes_per_second_total"); err != nil || n != 2 {
		t.Errorf("rate series: %d, %v; want s1's and new's", n, err)
	}
}

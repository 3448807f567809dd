package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// addressLoads are the loads Prometheus serves, by the instance label: an
// exporter's port on srv1's IP, srv2's exact address, the address srv3 and
// srv4 share at first, and an address no server has.
var addressLoads = map[string]float64{"127.0.0.11:9100": 10, "127.0.0.12:8002": 20, "127.0.0.13:8003": 40, "127.0.0.99:80": 5}

// addressPrometheus is addressLoads as gauges, an hour of them around now.
func addressPrometheus(now time.Time) string {
	d := testenv.PromHour(now, 15*time.Second).Type("weighter_load", "gauge")
	for instance, load := range addressLoads {
		d.Constant("weighter_load", fmt.Sprintf("instance=%q", instance), load)
	}
	return d.String()
}

// setAddr points a server-template slot at ip:port, as service discovery does.
func setAddr(t *testing.T, socket, server, ip string, port int) {
	t.Helper()
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "set server be_tpl/%s addr %s port %d\n", server, ip, port); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(conn)
	if err != nil || !strings.Contains(string(out), "changed") {
		t.Fatalf("set server addr: %q %v", out, err)
	}
}

// A server-template backend whose slots get their addresses at runtime (set
// server addr), weighted from Prometheus series that name servers by
// address: each series goes to the server at its address; one that two
// servers share goes to neither (they keep their weights, said once in the
// log and /metrics) until an address changes; one no server has is left out;
// and a source none of whose series matches fails the cycle with an error
// naming both sides.
func TestMatchByAddress(t *testing.T) {
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+`
backend be_tpl
  balance leastconn
  server-template srv 4 127.0.0.1:9 weight 100
backend be_none
  balance leastconn
  server-template srv 2 127.0.0.1:9 weight 100
`)
	c, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	if err != nil {
		t.Fatal(err)
	}
	setAddr(t, h.Socket, "srv1", "127.0.0.11", 8001)
	setAddr(t, h.Socket, "srv2", "127.0.0.12", 8002)
	setAddr(t, h.Socket, "srv3", "127.0.0.13", 8003)
	setAddr(t, h.Socket, "srv4", "127.0.0.13", 8003) // srv3's address too
	prom := testenv.StartPrometheus(t, addressPrometheus(time.Now()))
	backend := func(name, query string) string {
		return fmt.Sprintf("  - name: %s\n    match: address\n    fast_signal: off\n    max_step: 0\n    deadband: 0\n"+
			"    source: {prometheus: {url: %q, query: '%s', server_label: instance}}\n", name, prom.URL, query)
	}
	yml := "listen: \"\"\ninterval: 200ms\nhaproxy: {socket: " + h.Socket + "}\nbackends:\n" +
		backend("be_tpl", "weighter_load") + backend("be_none", `weighter_load{instance="127.0.0.99:80"}`)
	cfg, err := config.Parse("test.yml", []byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}

	// once: the plan names each server and its address.
	cycles, err := New(cfg, Options{}).RunOnce(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	tpl := map[string]weighter.ServerPlan{}
	for _, s := range cycles[0].Plan.Servers {
		tpl[s.Server] = s
	}
	if cycles[0].Result != weighter.ResultOK {
		t.Fatalf("be_tpl: %s %v", cycles[0].Result, cycles[0].Err)
	}
	for server, want := range map[string]struct {
		addr string
		load float64
	}{"srv1": {"127.0.0.11:8001", 10}, "srv2": {"127.0.0.12:8002", 20}, "srv3": {"127.0.0.13:8003", math.NaN()}, "srv4": {"127.0.0.13:8003", math.NaN()}} {
		got := tpl[server]
		if got.Address != want.addr || !(got.Load == want.load || math.IsNaN(got.Load) && math.IsNaN(want.load)) {
			t.Errorf("%s: address %s load %v, want %s %v", server, got.Address, got.Load, want.addr, want.load)
		}
	}
	if tpl["srv1"].New <= tpl["srv2"].New || !strings.HasPrefix(tpl["srv3"].Reason, "missing data") {
		t.Errorf("plan %+v: want srv1 above srv2, srv3 held for missing data", cycles[0].Plan.Servers)
	}
	if cycles[1].Result != weighter.ResultSourceError || !strings.Contains(fmt.Sprint(cycles[1].Err),
		`no series names the address of a server of the backend: 1 came back, such as "127.0.0.99:80"; the servers are at "127.0.0.1:9", "127.0.0.1:9"`) {
		t.Errorf("be_none: %s %v, want a source error naming both sides", cycles[1].Result, cycles[1].Err)
	}

	// The daemon: weights written by address, the ambiguity in /metrics and
	// the log, until an address changes at runtime.
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Notifier: n, Registry: reg, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	startDaemon(t, d, n)
	ambiguous := map[string]string{"backend": "be_tpl", "reason": "ambiguous"}
	testenv.WaitFor(t, "the first fetch", func() bool { return testenv.Gauge(t, reg, "haproxy_weighter_address_unmatched_series", ambiguous) == 1 })
	if got := testenv.Gauge(t, reg, "haproxy_weighter_address_unmatched_series", map[string]string{"backend": "be_tpl", "reason": "unknown"}); got != 1 {
		t.Errorf("unknown series %v, want 1", got)
	}
	// server_info comes from the cycle's read, recorded when the cycle ends
	// (after the fetch that set the gauge above).
	testenv.WaitFor(t, "server_info of srv2", func() bool {
		return testenv.Gauge(t, reg, "haproxy_weighter_server_info", map[string]string{"backend": "be_tpl", "server": "srv2", "address": "127.0.0.12:8002"}) == 1
	})
	weights := func() map[string]int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return mustWeights(ctx, t, c.Backend("be_tpl"))
	}
	testenv.WaitFor(t, "srv1 weighted above srv2", func() bool { w := weights(); return w["srv1"] > w["srv2"] && w["srv2"] > 0 })
	if w := weights(); w["srv3"] != w["srv4"] {
		t.Errorf("srv3 and srv4, which share an address, weighted apart: %v", w)
	}

	setAddr(t, h.Socket, "srv4", "127.0.0.14", 8004)
	testenv.WaitFor(t, "the ambiguity gone", func() bool { return testenv.Gauge(t, reg, "haproxy_weighter_address_unmatched_series", ambiguous) == 0 })
	testenv.WaitFor(t, "srv3 weighted by its own load", func() bool { w := weights(); return w["srv3"] < w["srv2"] })
	testenv.WaitFor(t, "server_info of srv4 at its new address", func() bool {
		return testenv.Gauge(t, reg, "haproxy_weighter_server_info", map[string]string{"backend": "be_tpl", "server": "srv4", "address": "127.0.0.14:8004"}) == 1
	})
	if got := testenv.Gauge(t, reg, "haproxy_weighter_server_info", map[string]string{"backend": "be_tpl", "server": "srv4", "address": "127.0.0.13:8003"}); !math.IsNaN(got) {
		t.Errorf("server_info of srv4 at its old address still exported")
	}
	log := logs.String()
	if strings.Count(log, `level=WARN msg="series left out by address match" backend=be_tpl reason="127.0.0.13:8003 is the address of srv3 and srv4" effect="their servers have no data"`) != 1 ||
		strings.Count(log, `msg="every series matched by address again" backend=be_tpl`) != 1 {
		t.Errorf("want the ambiguity logged once and its end once:\n%s", log)
	}
}

// A reload that keeps a backend's source keeps its address matching (each
// fetch is handed the addresses of the new target's cycle); turning match on
// or off starts the source afresh.
func TestReloadKeepsAddressSource(t *testing.T) {
	build := func(yml string) []*managedBackend { return buildUnits(t, yml) }
	const head = "listen: \"\"\nhaproxy: {socket: /run/test.sock}\nbackends:\n  - name: be\n"
	const prom = "    source: {prometheus: {url: \"http://127.0.0.1:9090\", query: up, server_label: instance}}\n"
	for _, fast := range []string{"", "    fast_signal: off\n"} {
		old := build(head + "    match: address\n" + fast + prom)
		again := build(head + "    match: address\n" + fast + prom)
		keepControllers(old, again)
		if again[0].address != old[0].address || again[0].Backend.Source != old[0].Backend.Source {
			t.Errorf("%q: the address source is not kept", fast)
		}
		byName := build(head + fast + prom)
		keepControllers(again, byName)
		if byName[0].address != nil || byName[0].Backend.Source == again[0].Backend.Source {
			t.Errorf("%q: match: name keeps the address source", fast)
		}
	}
}

package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// startFleetHAProxy starts an HAProxy with the named backends, each with s1
// weight 10 and s2 weight 20.
func startFleetHAProxy(t *testing.T, backends ...string) *testenv.HAProxy {
	t.Helper()
	cfg := testenv.HAProxyDefaults
	for _, b := range backends {
		cfg += fmt.Sprintf("backend %s\n  balance leastconn\n  server s1 127.0.0.1:%d weight 10\n  server s2 127.0.0.1:%d weight 20\n",
			b, testenv.FreePort(t), testenv.FreePort(t))
	}
	return testenv.StartHAProxy(t, cfg)
}

// readWeights returns each server's weight as the target has it.
func readWeights(ctx context.Context, target weighter.Target) (map[string]int, error) {
	servers, err := target.Servers(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(servers))
	for _, s := range servers {
		out[s.Name] = s.Weight
	}
	return out, nil
}

// mustWeights is readWeights, failing the test when the target cannot be read.
func mustWeights(ctx context.Context, t *testing.T, target weighter.Target) map[string]int {
	t.Helper()
	w, err := readWeights(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// socketUp is haproxy_weighter_haproxy_socket_up of socket, or -1 when absent.
func socketUp(t *testing.T, reg *prometheus.Registry, socket string) float64 {
	t.Helper()
	if s := testenv.Series(t, reg, "haproxy_weighter_haproxy_socket_up", map[string]string{"socket": socket}); len(s) > 0 {
		return s[0].GetGauge().GetValue()
	}
	return -1
}

// socketInfo is the backend → socket of haproxy_weighter_backend_socket_info.
func socketInfo(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range testenv.Series(t, reg, "haproxy_weighter_backend_socket_info", nil) {
		l := testenv.Labels(m)
		out[l["backend"]] = l["socket"]
	}
	return out
}

// One daemon drives two HAProxy processes, a backend naming its own socket;
// when one HAProxy dies, only its backend fails, the other goes on being
// weighted, and /metrics and /readyz say which socket is down.
func TestOneDaemonTwoHAProxies(t *testing.T) {
	h1 := startFleetHAProxy(t, "be_a", "be_a2")
	h2 := startFleetHAProxy(t, "be_b")
	// No traffic: every load is 0, so each cycle moves both servers towards
	// max_weight, from the configured 10 and 20.
	stats := "    source: {haproxy: {counter: bytes_in, rate_window: 300ms}}\n"
	yml := "listen: \"\"\ninterval: 100ms\nhaproxy: {socket: " + h1.Socket + "}\nbackends:\n" +
		"  - name: be_a\n" + stats +
		"  - name: be_a2\n" + stats +
		"  - name: be_b\n    haproxy: {socket: " + h2.Socket + "}\n" + stats
	cfg, err := config.Parse("test.yml", []byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Notifier: n, Registry: reg, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	startDaemon(t, d, n)

	// Backends on one socket share one client (one `show sess all` per
	// cycle for both), the other socket has its own.
	units := d.current().units
	if units[0].client != units[1].client || units[0].client == units[2].client {
		t.Fatalf("clients: be_a %p, be_a2 %p, be_b %p: want be_a and be_a2 on one, be_b on another",
			units[0].client, units[1].client, units[2].client)
	}
	written := func(socket, backend string) bool {
		w, err := testenv.ReadWeights(socket, backend)
		return err == nil && w["s1"] > 10 && w["s2"] > 20
	}
	testenv.WaitFor(t, "weights written to both HAProxies", func() bool {
		return written(h1.Socket, "be_a") && written(h1.Socket, "be_a2") && written(h2.Socket, "be_b")
	})
	if got, want := socketInfo(t, reg), map[string]string{"be_a": h1.Socket, "be_a2": h1.Socket, "be_b": h2.Socket}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("backend_socket_info %v, want %v", got, want)
	}
	if socketUp(t, reg, h1.Socket) != 1 || socketUp(t, reg, h2.Socket) != 1 {
		t.Errorf("socket_up %v %v, want 1 1", socketUp(t, reg, h1.Socket), socketUp(t, reg, h2.Socket))
	}
	testenv.WaitFor(t, "ready", func() bool { ok, _ := d.Ready(); return ok })

	h2.Kill()
	testenv.WaitFor(t, "be_b failing", func() bool { return cycles(t, reg, "be_b", weighter.ResultTargetError) >= 3 })
	okA := cycles(t, reg, "be_a", weighter.ResultOK)
	testenv.WaitFor(t, "be_a and be_a2 cycling on", func() bool {
		return cycles(t, reg, "be_a", weighter.ResultOK) >= okA+3 && cycles(t, reg, "be_a2", weighter.ResultOK) >= okA+3
	})
	if errs := cycles(t, reg, "be_a", weighter.ResultTargetError) + cycles(t, reg, "be_a2", weighter.ResultTargetError); errs != 0 {
		t.Errorf("%v failed cycles on the live HAProxy's backends", errs)
	}
	if socketUp(t, reg, h1.Socket) != 1 || socketUp(t, reg, h2.Socket) != 0 {
		t.Errorf("socket_up live %v dead %v, want 1 and 0", socketUp(t, reg, h1.Socket), socketUp(t, reg, h2.Socket))
	}
	// be_b's readiness runs out after 3 intervals without an ok cycle.
	var why string
	testenv.WaitFor(t, "not ready", func() bool {
		var ok bool
		ok, why = d.Ready()
		return !ok
	})
	if !strings.Contains(why, "backend be_b (HAProxy socket "+h2.Socket+" down: ") ||
		strings.Contains(why, "be_a") {
		t.Errorf("readiness says %q: want be_b alone, its socket down", why)
	}
}

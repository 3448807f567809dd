package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// cycles is the value of cycles_total for one backend and result; a
// backend or result "" is any, summed.
func cycles(t *testing.T, reg *prometheus.Registry, backend, result string) float64 {
	t.Helper()
	labels := map[string]string{}
	for k, v := range map[string]string{"backend": backend, "result": result} {
		if v != "" {
			labels[k] = v
		}
	}
	return testenv.Counter(t, reg, "haproxy_weighter_cycles_total", labels)
}

// A `balance first` backend ignores weights. The start check said so in the
// log, and then the daemon wrote weights to it anyway, counted its cycles ok
// and called it ready. Until its start check passes, each cycle of a backend
// runs the check and fails with its error, writing nothing.
func TestBackendFailingStartCheckIsNeverWritten(t *testing.T) {
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
backend be_first
  balance first
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 10
`, testenv.FreePort(t), testenv.FreePort(t)))
	yml := "listen: \"\"\ninterval: 100ms\nhaproxy: {socket: " + h.Socket + "}\nbackends:\n  - name: be_first\n    source: {haproxy: {counter: bytes_in}}\n"
	cfg, err := config.Parse("test.yml", []byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := haproxy.New(cfg.HAProxy)
	if err != nil {
		t.Fatal(err)
	}
	hb := client.Backend("be_first")
	ctl, err := weighter.NewController(weighter.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	// Loads 10 and 40: a cycle that ran would write s1 a higher weight than s2.
	u := &managedBackend{Kind: "haproxy", target: hb,
		Backend: &weighter.Weigher{Name: "be_first", Source: &fakeSource{}, Target: hb, Controller: ctl}}
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	d := New(cfg, Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Registry: reg})
	ctx, cancel := context.WithCancel(context.Background())
	<-d.start(ctx, []*managedBackend{u}, nil)
	t.Cleanup(func() { cancel(); d.current().stop() })

	testenv.WaitFor(t, "three failed cycles", func() bool { return cycles(t, reg, "be_first", weighter.ResultTargetError) >= 3 })
	if ok := cycles(t, reg, "be_first", weighter.ResultOK); ok != 0 {
		t.Errorf("%v cycles counted ok", ok)
	}
	if ready, _ := d.Ready(); ready {
		t.Error("the backend is reported ready")
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	servers, err := hb.Servers(wctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if s.Weight != 10 {
			t.Errorf("%s: weight %d written, want the configured 10 untouched", s.Name, s.Weight)
		}
	}
	want := "backend be_first: backend algorithm does not accept runtime weights: balance first (first ignores server weights)"
	named := false
	for _, line := range strings.Split(logs.String(), "\n") {
		named = named || strings.Contains(line, `msg="cycle failed"`) && strings.Contains(line, "result=haproxy_error") && strings.Contains(line, want)
	}
	if !named {
		t.Errorf("no failed cycle names the algorithm:\n%s", logs.String())
	}
}

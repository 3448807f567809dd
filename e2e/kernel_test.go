package e2e

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// kernelFleet is HAProxy in front of four stream servers, each sending its
// connections 20 kB/s, and eight clients spread over them by leastconn.
func kernelFleet(t *testing.T) (*testenv.HAProxy, []*streamServer) {
	t.Helper()
	front := testenv.FreePort(t)
	var srv []*streamServer
	var cfg strings.Builder
	cfg.WriteString(testenv.HAProxyDefaults)
	fmt.Fprintf(&cfg, "frontend fe\n  bind 127.0.0.1:%d\n  default_backend be_ingest\n", front)
	cfg.WriteString("backend be_ingest\n  balance leastconn\n")
	for _, s := range servers {
		ss := startStreamServer(t, 20_000)
		srv = append(srv, ss)
		fmt.Fprintf(&cfg, "  server %s %s weight 100\n", s, ss.ln.Addr())
	}
	h := testenv.StartHAProxy(t, cfg.String())
	openClients(t, fmt.Sprintf("127.0.0.1:%d", front), 8)
	return h, srv
}

// s3Drops makes s3's connections carry ten times the bytes and waits for
// its weight to fall to a quarter of the others'.
func s3Drops(t *testing.T, h *testenv.HAProxy, srv []*streamServer) {
	t.Helper()
	srv[2].rate.Store(200_000)
	testenv.WaitWithin(t, 15*time.Second, "s3's weight down to a quarter of the others'", func() bool {
		w := testenv.Weights(t, h.Socket, "be_ingest")
		return w["s3"]*4 <= min(w["s1"], w["s2"], w["s4"])
	})
}

// TestQuickStartWeighsByTheSocketTable: the quick start's command line,
// unchanged, reads the fast signal from the kernel's socket table: the
// start line and haproxy_weighter_fast_signal_reader say so, and the
// weights follow the traffic.
func TestQuickStartWeighsByTheSocketTable(t *testing.T) {
	h, srv := kernelFleet(t)
	prom := testenv.StartPrometheus(t, flatPromData(time.Now()))
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	d := startDaemon(t, listen, "--socket", h.Socket, "--backend", "be_ingest", "--prometheus-url", prom.URL,
		"--query", "rate(datapoints_received_total[1m])", "--server-label", "server", "--listen", listen)
	testenv.WaitWithin(t, 10*time.Second, "the start line naming the socket table", func() bool {
		return strings.Contains(d.logs.String(), `"msg":"weighting by the calibrated fast signal","backend":"be_ingest","reader":"kernel"`)
	})
	kernel := `haproxy_weighter_fast_signal_reader{backend="be_ingest",reader="kernel"}`
	testenv.WaitWithin(t, 10*time.Second, "the kernel reader in use", func() bool { return d.metric(kernel) == 1 })
	s3Drops(t, h, srv)
	if v := d.metric(kernel); v != 1 {
		t.Errorf("%s = %v after the change, want 1", kernel, v)
	}
	if logs := d.logs.String(); strings.Contains(logs, "cannot be read") || strings.Contains(logs, "reader failing") {
		t.Errorf("a fast signal reader failed:\n%s", logs)
	}
	if code := d.stop(); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}

// TestOutsideTheNamespaceFallsBackToSessions: the daemon in a network
// namespace of its own (unshare -n; HAProxy's unix socket still reaches
// it) cannot see HAProxy's connections in its socket table: it says so in
// one line, reads show sess all instead, and the weights still follow the
// traffic.
func TestOutsideTheNamespaceFallsBackToSessions(t *testing.T) {
	h, srv := kernelFleet(t)
	path := writeConfig(t, fmt.Sprintf("listen: \"\"\nhaproxy: {socket: %s}\nbackends:\n  - name: be_ingest\n    source: {haproxy: {counter: bytes_out}}\n", h.Socket))
	logs := &testenv.SyncBuffer{}
	cmd := exec.Command("unshare", "-n", binary, "run", "--log-format", "json", "--config", path)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare -n: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	said := regexp.MustCompile(`"msg":"fast signal reader failing",.*"reader":"kernel","reason":"not visible: the daemon is not in HAProxy's network namespace","next":"sessions","retry_every":60000000000`)
	testenv.WaitWithin(t, 10*time.Second, "the line saying why the socket table is not read", func() bool {
		return said.MatchString(logs.String())
	})
	testenv.WaitWithin(t, 10*time.Second, "the start line naming show sess all", func() bool {
		return strings.Contains(logs.String(), `"msg":"weighting by the fast signal","backend":"be_ingest","reader":"sessions"`)
	})
	s3Drops(t, h, srv)
	if n := strings.Count(logs.String(), `"msg":"fast signal reader failing"`); n != 1 {
		t.Errorf("%d lines say a reader fails, want 1:\n%s", n, logs.String())
	}
}

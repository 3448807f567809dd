package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

const query = "rate(datapoints_received_total[1m])"

// promData is an hour of counter samples every 5s around now (so that the
// README's rate(...[15s]) sees three), each server's counter growing at its
// load: rate() at "now" returns exactly the loads. A test may add series of
// the family before String.
func promData(now time.Time) *testenv.PromData {
	d := testenv.PromHour(now, 5*time.Second).Type("datapoints_received", "counter")
	for _, s := range servers {
		d.Rate("datapoints_received_total", fmt.Sprintf("server=%q", s), loads[s])
	}
	return d
}

// promConfig turns the rate limit and deadband off so one cycle reaches the
// hand-computed weights; interval 1s keeps the test short, and so does a 2 s
// calibration refresh: with no traffic through HAProxy the source's loads
// weigh, and it is asked once per refresh (15 s by default).
func promConfig(socket, promURL, listen string) string {
	return fmt.Sprintf(`interval: 1s
listen: %s
restore_on_exit: true
haproxy:
  socket: %s
backends:
  - name: be_ingest
    source:
      prometheus: {url: %q, query: %q, server_label: server}
    calibration: {refresh: 2s}
    aggregate: last
    function: limited-proportions
    limiting_factor: 4
    aggressiveness: 1
    max_step: 0
    deadband: 0
`, listen, socket, promURL, query)
}

func TestPrometheus(t *testing.T) {
	h := testenv.StartHAProxy(t, haproxyConfig(t))
	prom := testenv.StartPrometheus(t, promData(time.Now()).String())
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := writeConfig(t, promConfig(h.Socket, prom.URL, listen))

	t.Run("once prints the plan and writes nothing", func(t *testing.T) {
		r := runCmd(t, "once", "--config", cfg)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		if got := planTable(t, r.stdout); !maps.Equal(got, want) {
			t.Errorf("plan %v, want %v\n%s", got, want, r.stdout)
		}
		if !strings.Contains(r.stdout, "dry run") {
			t.Errorf("no dry-run notice:\n%s", r.stdout)
		}
		if got := testenv.Weights(t, h.Socket, "be_ingest"); !maps.Equal(got, initial) {
			t.Errorf("dry run changed weights: %v", got)
		}
	})
	t.Run("once with flags only", func(t *testing.T) {
		r := runCmd(t, "once", "--socket", h.Socket, "--backend", "be_ingest", "--prometheus-url", prom.URL,
			"--query", query, "--server-label", "server", "-o", "json")
		if r.code != 0 || !strings.Contains(r.stdout, `"result": "ok"`) || strings.Count(r.stdout, `"server": "s`) != 4 {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("once fails clearly when the source is down", func(t *testing.T) {
		dead := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
		r := runCmd(t, "once", "--socket", h.Socket, "--backend", "be_ingest", "--prometheus-url", dead, "--query", query)
		if r.code == 0 || !strings.Contains(r.stderr, "source_error") || !strings.Contains(r.stderr, "source unreachable") {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("once --apply sets exactly the plan", func(t *testing.T) {
		r := runCmd(t, "once", "--config", cfg, "--apply")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		if got := testenv.Weights(t, h.Socket, "be_ingest"); !maps.Equal(got, want) {
			t.Errorf("weights %v, want %v", got, want)
		}
	})
	t.Run("run with the flags of the README", func(t *testing.T) {
		flagListen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		d := startDaemon(t, flagListen, "--socket", h.Socket, "--backend", "be_ingest", "--prometheus-url", prom.URL,
			"--query", "rate(datapoints_received_total[15s])", "--server-label", "server", "--interval", "5s",
			"--listen", flagListen)
		ok := `haproxy_weighter_cycles_total{backend="be_ingest",result="ok"}`
		testenv.WaitWithin(t, 15*time.Second, "a successful cycle", func() bool { return d.metric(ok) >= 1 })
		if got := testenv.Weights(t, h.Socket, "be_ingest"); !maps.Equal(got, want) {
			t.Errorf("weights moved away from the balanced ones: %v", got)
		}
		if code := d.stop(); code != 0 {
			t.Errorf("exit code %d after SIGTERM", code)
		}
	})
	h.Restart() // back to weight 100 everywhere for the daemon
	if got := testenv.Weights(t, h.Socket, "be_ingest"); !maps.Equal(got, initial) {
		t.Fatalf("after restart: %v", got)
	}
	t.Run("run", func(t *testing.T) { testRun(t, h, prom, cfg, listen) })
}

func testRun(t *testing.T, h *testenv.HAProxy, prom *testenv.Prometheus, cfg, listen string) {
	d := startDaemon(t, listen, "--config", cfg)
	const writes = `haproxy_weighter_weight_writes_total{backend="be_ingest"}`
	testenv.WaitWithin(t, 20*time.Second, "weights converge", func() bool { return maps.Equal(testenv.Weights(t, h.Socket, "be_ingest"), want) })
	testenv.WaitWithin(t, 5*time.Second, "ready", func() bool { c, _ := d.get("/readyz"); return c == http.StatusOK })
	// Converged in one cycle: each server was written exactly once.
	if n := d.metric(writes); n != 4 {
		t.Errorf("%s = %v, want 4 (one write per server)", writes, n)
	}
	if w := d.metric(`haproxy_weighter_server_weight{backend="be_ingest",server="s1"}`); w != 256 {
		t.Errorf("server_weight s1 = %v, want 256", w)
	}
	if code, _ := d.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d", code)
	}

	// Prometheus down: weights stay, the error shows, readiness goes.
	prom.Stop()
	srcErr := `haproxy_weighter_cycles_total{backend="be_ingest",result="source_error"}`
	testenv.WaitWithin(t, 10*time.Second, "source_error counted", func() bool { return d.metric(srcErr) >= 1 })
	testenv.WaitWithin(t, 15*time.Second, "/readyz failing", func() bool { c, _ := d.get("/readyz"); return c == http.StatusServiceUnavailable })
	if got := testenv.Weights(t, h.Socket, "be_ingest"); !maps.Equal(got, want) {
		t.Errorf("weights changed while Prometheus was down: %v", got)
	}
	testenv.WaitWithin(t, 5*time.Second, "the source error in the logs", func() bool {
		logs := d.logs.String()
		return strings.Contains(logs, `"result":"source_error"`) && strings.Contains(logs, "cycle failed")
	})

	// Prometheus back: the daemon recovers by itself.
	prom.Start()
	testenv.WaitWithin(t, 15*time.Second, "/readyz ok again", func() bool { c, _ := d.get("/readyz"); return c == http.StatusOK })
	testenv.WaitWithin(t, 5*time.Second, "the recovery in the logs", func() bool { return strings.Contains(d.logs.String(), "cycle ok again") })

	// HAProxy restarted: runtime weights are lost and must be re-applied.
	h.Restart()
	testenv.WaitWithin(t, 15*time.Second, "weights re-applied after HAProxy restart",
		func() bool { return maps.Equal(testenv.Weights(t, h.Socket, "be_ingest"), want) })

	// SIGHUP with a broken file: rejected, the old configuration keeps running.
	good, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append(good, "    limiting_factr: 3\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Process.Signal(syscall.SIGHUP)
	const reloadOK = "haproxy_weighter_config_reload_success"
	testenv.WaitWithin(t, 10*time.Second, "reload rejected", func() bool { return d.metric(reloadOK) == 0 })
	testenv.WaitWithin(t, 5*time.Second, "the rejected reload saying what is wrong", func() bool {
		return strings.Contains(d.logs.String(), `unknown key \"limiting_factr\"`)
	})
	if err := os.WriteFile(cfg, good, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Process.Signal(syscall.SIGHUP)
	testenv.WaitWithin(t, 10*time.Second, "reload accepted", func() bool { return d.metric(reloadOK) == 1 })
	testenv.WaitWithin(t, 10*time.Second, "ready after reload", func() bool { c, _ := d.get("/readyz"); return c == http.StatusOK })

	if code := d.stop(); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	if got := testenv.Weights(t, h.Socket, "be_ingest"); !maps.Equal(got, initial) {
		t.Errorf("restore_on_exit: weights %v, want %v", got, initial)
	}
}

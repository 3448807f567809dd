package examples

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

const unitPath = "systemd/haproxy-weighter.service"

// unitDirectives parses a unit file into key -> values (all occurrences, any section).
func unitDirectives(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			d[k] = append(d[k], v)
		}
	}
	return d
}

func TestSystemdUnitVerifies(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze", "apt-get install systemd")
	bin := weighterBinary(t)
	// systemd-analyze checks that ExecStart exists: point it at the binary just built.
	text, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "haproxy-weighter.service")
	fixed := strings.ReplaceAll(string(text), "/usr/bin/haproxy-weighter", bin)
	if err := os.WriteFile(unit, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runErr(time.Minute, analyze, "verify", unit)
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// Warnings about our unit (unknown keys, bad values) do not change the exit code.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "haproxy-weighter.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
	// The sandbox as systemd scores it (1.8 today, "OK"; 0 is the most confined, 10 none): a
	// hardening line dropped or weakened pushes it past 2.0 and fails here.
	out, err = runErr(time.Minute, analyze, "security", "--offline=yes", "--threshold=20", "--no-pager", unit)
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0 (--threshold=20): %v\n%s", err, out)
	}
}

func TestSystemdUnitContract(t *testing.T) {
	d := unitDirectives(t, unitPath)
	want := map[string]string{
		"Type":                    "notify",
		"ProtectSystem":           "strict",
		"NoNewPrivileges":         "yes",
		"SupplementaryGroups":     "haproxy",
		"User":                    "haproxy-weighter",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
		"ExecStart":               "/usr/bin/haproxy-weighter run --config /etc/haproxy-weighter/config.yaml",
		"ExecReload":              "/bin/kill -HUP $MAINPID",
	}
	for k, v := range want {
		if got := d[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%q, want %q", k, got, v)
		}
	}
	if len(d["WatchdogSec"]) != 1 {
		t.Errorf("WatchdogSec missing")
	}
}

// TestDaemonSdNotify runs the built binary's `run` against a real HAProxy with
// NOTIFY_SOCKET pointing at a unixgram socket this test listens on, as systemd would.
func TestDaemonSdNotify(t *testing.T) {
	bin := weighterBinary(t)
	sink := testenv.StartDiscardServer(t)
	front := "127.0.0.1:" + itoa(testenv.FreePort(t))
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+`
frontend fe
  bind `+front+`
  default_backend be_app
backend be_app
  balance leastconn
  server s1 `+sink+` weight 10
  server s2 `+sink+` weight 20
`)
	// One open connection gives the servers unequal loads (1 and 0 sessions),
	// so every metric has a value, backend_imbalance included (it is left out
	// while all loads are 0: max/mean is undefined).
	client, err := net.Dial("tcp", front)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	dir := t.TempDir()
	notify := filepath.Join(dir, "notify.sock")
	conn := listenNotify(t, notify)
	defer conn.Close()
	listen := "127.0.0.1:" + itoa(testenv.FreePort(t))
	cfg := filepath.Join(dir, "config.yaml")
	writeFile(t, cfg, `interval: 1s
listen: `+listen+`
haproxy:
  socket: `+h.Socket+`
backends:
  - name: be_app
    source:
      haproxy: {counter: current_sessions}
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", cfg)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notify, "WATCHDOG_USEC=2000000")
	logs, waited, kill := startWaited(t, cmd)
	defer kill()

	msgs := readNotify(t, conn, 20*time.Second, func(seen []string) bool {
		return count(seen, "READY=1") > 0 && count(seen, "WATCHDOG=1") >= 2
	})
	if i, j := index(msgs, "READY=1"), index(msgs, "WATCHDOG=1"); i < 0 || j < 0 {
		t.Fatalf("want READY=1 and WATCHDOG=1, got %q\nlogs:\n%s", msgs, logs.String())
	}
	checkExposedMetrics(t, listen)

	checkStopsOnSIGTERM(t, "the daemon", cmd, conn, waited, logs)
}

// readNotify collects sd_notify messages (one datagram may hold several lines) until
// done says so or the deadline passes.
func readNotify(t *testing.T, conn *net.UnixConn, limit time.Duration, done func([]string) bool) []string {
	t.Helper()
	var seen []string
	deadline := time.Now().Add(limit)
	buf := make([]byte, 4096)
	for !done(seen) {
		if err := conn.SetReadDeadline(deadline); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			break // deadline: the caller reports what is missing
		}
		seen = append(seen, strings.Split(strings.TrimSpace(string(buf[:n])), "\n")...)
	}
	return seen
}

// checkExposedMetrics scrapes the running daemon and checks that every metric the
// dashboard and the alerts use is really exported.
func checkExposedMetrics(t *testing.T, listen string) {
	t.Helper()
	var body string
	deadline := time.Now().Add(15 * time.Second)
	re := regexp.MustCompile(`(?m)^(haproxy_weighter_[a-z0-9_]+)`)
	for {
		resp, err := http.Get("http://" + listen + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		exposed := map[string]bool{}
		for _, m := range re.FindAllStringSubmatch(body, -1) {
			exposed[baseMetric(m[1])] = true
		}
		var missing []string
		for _, m := range ourMetrics {
			if !exposed["haproxy_weighter_"+m] {
				missing = append(missing, m)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("metrics used by the dashboard/alerts but not exported: %v\n%s", missing, body)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestWatchdogFedWhateverTheInterval: WATCHDOG=1 goes every half $WATCHDOG_USEC while the
// backends' loops turn, not once per cycle, so an interval longer than the unit's WatchdogSec
// (10 s against 1 s here) does not get the daemon killed.
func TestWatchdogFedWhateverTheInterval(t *testing.T) {
	t.Parallel()
	bin := weighterBinary(t)
	h := startAppHAProxy(t)
	dir := t.TempDir()
	notify := filepath.Join(dir, "notify.sock")
	conn := listenNotify(t, notify)
	defer conn.Close()
	cfg := filepath.Join(dir, "config.yaml")
	writeFile(t, cfg, "interval: 10s\nlisten: \"\"\nhaproxy: {socket: "+h.Socket+"}\nbackends:\n  - name: be_app\n    source: {haproxy: {counter: current_sessions}}\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", cfg)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notify, "WATCHDOG_USEC=1000000")
	logs := startLogged(t, cmd)
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	// Four pings take 2 s at half a second each; one per cycle would take 40 s.
	msgs := readNotify(t, conn, 8*time.Second, func(seen []string) bool { return count(seen, "WATCHDOG=1") >= 4 })
	if count(msgs, "READY=1") != 1 || count(msgs, "WATCHDOG=1") < 4 {
		t.Errorf("interval 10s, WATCHDOG_USEC 1 s: want READY=1 and 4 WATCHDOG=1 within 8 s, got %q\nlogs:\n%s", msgs, logs.String())
	}
}

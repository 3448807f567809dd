package examples

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// Stand-ins for the ids of the package's user haproxy-weighter and of Debian's group haproxy.
const (
	serviceUserID = 64531
	haproxyGroup  = 64532
)

// TestDaemonUnderTheUnitsSandbox runs the daemon as the unit runs it, as far as it can be
// without systemd as PID 1: as an unprivileged user (User=) with HAProxy's group added
// (SupplementaryGroups=haproxy), no capabilities (CapabilityBoundingSet=) and no new
// privileges; every directory it uses is root's and not writable by it, as under
// ProtectSystem=strict (which it cannot be given here: a mount namespace needs privileges a
// CI container or chroot may not have; `systemd-analyze security` scores that part). HAProxy runs as root
// and makes its admin socket mode 660 in a directory laid out as Debian's tmpfiles.d lays
// /run/haproxy (2775, group haproxy); the config is root:<user's group> 0640, as the postinst
// leaves it. The daemon must read it, tell systemd READY=1 and WATCHDOG=1 over a
// NOTIFY_SOCKET, write weights through the socket, and stop on SIGTERM.
func TestDaemonUnderTheUnitsSandbox(t *testing.T) {
	t.Parallel()
	requireTool(t, "setpriv", "apt-get install util-linux")
	hap := requireTool(t, "haproxy", "apt-get install haproxy")
	if os.Geteuid() != 0 {
		t.Fatal("switching users needs root (CI runs as root)")
	}
	d := unitDirectives(t, unitPath)
	for k, v := range map[string]string{"ProtectSystem": "strict", "NoNewPrivileges": "yes", "CapabilityBoundingSet": "",
		"SupplementaryGroups": "haproxy", "User": "haproxy-weighter"} {
		if got := d[k]; len(got) != 1 || got[0] != v {
			t.Fatalf("%s=%q, this test emulates %q: revisit it", k, got, v)
		}
	}

	base := t.TempDir()
	must(t, os.Chmod(filepath.Dir(base), 0o755))
	must(t, os.Chmod(base, 0o755))
	runDir := filepath.Join(base, "run", "haproxy")
	must(t, os.MkdirAll(runDir, 0o755))
	must(t, os.Chown(runDir, 0, haproxyGroup))
	must(t, os.Chmod(runDir, 0o775|os.ModeSetgid))
	socket := filepath.Join(runDir, "admin.sock")

	sink := testenv.StartDiscardServer(t)
	hcfg := filepath.Join(base, "haproxy.cfg")
	writeFile(t, hcfg, "global\n    stats socket "+socket+" mode 660 level admin\n"+testenv.HAProxyDefaults+`
backend be_app
    balance leastconn
    server s1 `+sink+` weight 10
    server s2 `+sink+` weight 20
`)
	startHAProxyAs(t, hap, hcfg, 0, socket)
	if fi, err := os.Stat(socket); err != nil || fi.Sys().(*syscall.Stat_t).Gid != haproxyGroup {
		t.Fatalf("HAProxy's socket %v: %v, want group %d from the setgid directory", fi, err, haproxyGroup)
	}

	etc := filepath.Join(base, "etc")
	must(t, os.Mkdir(etc, 0o755))
	listen := "127.0.0.1:" + itoa(testenv.FreePort(t))
	cfg := filepath.Join(etc, "config.yaml")
	writeFile(t, cfg, "interval: 1s\nlisten: "+listen+"\nhaproxy: {socket: "+socket+"}\nbackends:\n  - name: be_app\n    source: {haproxy: {counter: current_sessions}}\n")
	must(t, os.Chown(cfg, 0, serviceUserID))
	must(t, os.Chmod(cfg, 0o640))

	notifyDir := filepath.Join(base, "notify")
	must(t, os.Mkdir(notifyDir, 0o755))
	notify := filepath.Join(notifyDir, "notify.sock")
	conn := listenNotify(t, notify)
	defer conn.Close()
	must(t, os.Chmod(notify, 0o777)) // as /run/systemd/notify

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// setpriv execs the daemon: one process, signalled below.
	cmd := exec.CommandContext(ctx, "setpriv", fmt.Sprintf("--reuid=%d", serviceUserID), fmt.Sprintf("--regid=%d", serviceUserID),
		fmt.Sprintf("--groups=%d", haproxyGroup), "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all",
		weighterBinary(t), "run", "--config", cfg)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notify, "WATCHDOG_USEC=2000000")
	cmd.Dir = "/" // a system unit's working directory (the test's, under /root, may deny the user)
	logs, waited, kill := startWaited(t, cmd)
	defer kill()

	msgs := readNotify(t, conn, 30*time.Second, func(seen []string) bool {
		return count(seen, "READY=1") > 0 && count(seen, "WATCHDOG=1") > 0
	})
	if count(msgs, "READY=1") == 0 || count(msgs, "WATCHDOG=1") == 0 {
		t.Fatalf("under the sandbox: want READY=1 and WATCHDOG=1, got %q\nlogs:\n%s", msgs, logs.String())
	}
	// Both weights move to 256 (no session open: equal loads), max_step 2 a cycle.
	okRe := regexp.MustCompile(`(?m)^haproxy_weighter_cycles_total\{backend="be_app",result="ok"\} (\d+)`)
	writesRe := regexp.MustCompile(`(?m)^haproxy_weighter_weight_writes_total\{backend="be_app"\} (\d+)`)
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get("http://" + listen + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		if number(okRe, body) > 0 && number(writesRe, body) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("under the sandbox: no ok cycle with a weight written through %s\nlogs:\n%s", socket, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	checkStopsOnSIGTERM(t, "under the sandbox", cmd, conn, waited, logs)
}

// number is the first capture of re in s as an integer, 0 without a match.
func number(re *regexp.Regexp, s string) int {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

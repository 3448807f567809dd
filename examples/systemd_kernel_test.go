package examples

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestUnitSandboxReadsTheSocketTable: under the unit's sandbox as
// TestDaemonUnderTheUnitsSandbox emulates it (an unprivileged user with
// HAProxy's group, no capabilities, no new privileges), with HAProxy
// running as a user of its own as Debian's does, the default fast signal
// is the kernel's socket table, HAProxy's sockets told apart by its uid
// (the inode needs CAP_SYS_PTRACE, which the unit does not give): the
// start line and haproxy_weighter_fast_signal_reader say so, and the
// signal is live. The unit must not hide other users' processes
// (ProtectProc=invisible would hide HAProxy's /proc entry).
func TestUnitSandboxReadsTheSocketTable(t *testing.T) {
	t.Parallel()
	requireTool(t, "setpriv", "apt-get install util-linux")
	hap := requireTool(t, "haproxy", "apt-get install haproxy")
	if os.Geteuid() != 0 {
		t.Fatal("switching users needs root (CI runs as root)")
	}
	d := unitDirectives(t, unitPath)
	for k, v := range map[string]string{"CapabilityBoundingSet": "", "NoNewPrivileges": "yes", "ProtectProc": "default",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK", "User": "haproxy-weighter"} {
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
	front := "127.0.0.1:" + itoa(testenv.FreePort(t))
	hcfg := filepath.Join(base, "haproxy.cfg")
	writeFile(t, hcfg, "global\n    stats socket "+socket+" mode 660 level admin\n"+testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
    bind %s
    default_backend be_app
backend be_app
    balance leastconn
    server s1 %s weight 100
    server s2 %s weight 100
`, front, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)))
	// HAProxy as its own user (Debian's haproxy), here the group's id.
	startHAProxyAs(t, hap, hcfg, haproxyGroup, socket)
	for range 4 {
		c, err := net.Dial("tcp", front)
		must(t, err)
		t.Cleanup(func() { c.Close() })
		testenv.WriteEvery(t, c, 500, 20*time.Millisecond)
		time.Sleep(50 * time.Millisecond) // placed before the next: leastconn alternates
	}

	etc := filepath.Join(base, "etc")
	must(t, os.Mkdir(etc, 0o755))
	listen := "127.0.0.1:" + itoa(testenv.FreePort(t))
	cfg := filepath.Join(etc, "config.yaml")
	writeFile(t, cfg, "interval: 1s\nlisten: "+listen+"\nhaproxy: {socket: "+socket+"}\nbackends:\n  - name: be_app\n    source: {haproxy: {counter: bytes_in}}\n")
	must(t, os.Chown(cfg, 0, serviceUserID))
	must(t, os.Chmod(cfg, 0o640))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "setpriv", fmt.Sprintf("--reuid=%d", serviceUserID), fmt.Sprintf("--regid=%d", serviceUserID),
		fmt.Sprintf("--groups=%d", haproxyGroup), "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all",
		weighterBinary(t), "run", "--config", cfg)
	cmd.Dir = "/"
	logs, _, kill := startWaited(t, cmd)
	defer kill()

	kernel := `haproxy_weighter_fast_signal_reader{backend="be_app",reader="kernel"} 1`
	live := `haproxy_weighter_fast_signal_state{backend="be_app",state="live"} 1`
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get("http://" + listen + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		if strings.Contains(body, kernel) && strings.Contains(body, live) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("under the sandbox: no %q and %q\nlogs:\n%s", kernel, live, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if l := logs.String(); !strings.Contains(l, "reader=kernel ownership=uid") || strings.Contains(l, "cannot be read") || strings.Contains(l, "reader failing") {
		t.Errorf("under the sandbox: want the socket table read by HAProxy's uid, and no reader failing:\n%s", l)
	}
}

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestRestoreFailureExitsNonZero: with restore_on_exit, a SIGTERM while
// HAProxy is down leaves the daemon's weights in place; the process must say
// so and exit 1, so that systemd and whoever stopped it learn of it.
func TestRestoreFailureExitsNonZero(t *testing.T) {
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
backend be
  balance roundrobin
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 20
`, testenv.FreePort(t), testenv.FreePort(t)))
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := writeConfig(t, fmt.Sprintf("listen: %q\ninterval: 1h\nrestore_on_exit: true\nhaproxy: {socket: %s, timeout: 2s}\n"+
		"backends:\n  - name: be\n    source: {haproxy: {counter: bytes_in}}\n", listen, h.Socket))
	d := startDaemon(t, listen, "--config", cfg)
	testenv.WaitWithin(t, 10*time.Second, "the start-up weights kept", func() bool {
		return strings.Contains(d.logs.String(), "start-up weights kept for restore_on_exit")
	})
	h.Kill()
	if code := d.stop(); code != 1 {
		t.Errorf("exit code %d after a failed restore, want 1\n%s", code, d.logs.String())
	}
	for _, want := range []string{`"msg":"restore failed","backend":"be","restore":"restore_on_exit"`, "error: restore_on_exit: backend be:"} {
		if !strings.Contains(d.logs.String(), want) {
			t.Errorf("output lacks %s:\n%s", want, d.logs.String())
		}
	}
}

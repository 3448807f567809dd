package daemon

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// The daemon given only HAProxy's master CLI weights the current worker, and
// after a reload (USR2 to the master) the new one, without a restart: the new
// worker starts from the configured weights and gets the daemon's again.
func TestDaemonThroughMasterCLIFollowsReload(t *testing.T) {
	h := testenv.StartHAProxyMaster(t, testenv.HAProxyDefaults+fmt.Sprintf(
		"backend be\n  balance leastconn\n  server s1 127.0.0.1:%d weight 10\n  server s2 127.0.0.1:%d weight 20\n",
		testenv.FreePort(t), testenv.FreePort(t)))
	yml := "listen: \"\"\ninterval: 100ms\nhaproxy: {socket: " + h.Socket + ", master: true}\nbackends:\n" +
		"  - name: be\n    source: {haproxy: {counter: bytes_in, rate_window: 300ms}}\n"
	cfg, err := config.Parse("test.yml", []byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Notifier: n, Registry: prometheus.NewRegistry(), Log: slog.New(slog.NewTextHandler(&logs, nil))})
	startDaemon(t, d, n)

	// No traffic: every load is 0, and the daemon moves both weights up
	// from the configured 10 and 20.
	weight := func(pid int, server string) int {
		out := h.Command(fmt.Sprintf("@!%d get weight be/%s", pid, server))
		w, err := strconv.Atoi(strings.Fields(out + " x")[0])
		if err != nil {
			return -1
		}
		return w
	}
	written := func(pid int) func() bool {
		return func() bool { return weight(pid, "s1") > 10 && weight(pid, "s2") > 20 }
	}
	first := h.Worker()
	testenv.WaitFor(t, "weights written to the first worker", written(first))

	second := h.Reload()
	if second == first {
		t.Fatalf("reload kept worker %d", first)
	}
	testenv.WaitFor(t, "weights written to the new worker", written(second))
	if strings.Contains(logs.String(), "level=ERROR msg=\"backend check failed") {
		t.Errorf("the start check failed:\n%s", logs.String())
	}
}

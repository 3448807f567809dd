package daemon

import (
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// A reload does not move the listener: the configuration in force keeps the
// address it serves on, so that each later reload still says the new one
// needs a restart, and what reads it (the peers' loopback warning) sees the
// address the daemon really listens on.
func TestReloadKeepsTheListenAddressInForce(t *testing.T) {
	serving := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := testConfig(t, "be")
	cfg.Listen = serving
	var logs testenv.SyncBuffer
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Notifier: n,
		Reload: func() (*config.Config, error) {
			next := testConfig(t, "be")
			next.Listen = "0.0.0.0:9842"
			return next, nil
		}})
	r := startDaemon(t, d, n)
	for i := 1; i <= 2; i++ {
		r.hup <- syscall.SIGHUP
		testenv.WaitFor(t, "the reload", func() bool { return strings.Count(logs.String(), "config reloaded") == i })
	}
	if got := strings.Count(logs.String(), `msg="listen address changes need a restart"`); got != 2 {
		t.Errorf("the pending listen change said %d times over 2 reloads, want 2:\n%s", got, logs.String())
	}
	if got := d.config().Listen; got != serving {
		t.Errorf("listen in force %q after the reloads, want %q, where it serves", got, serving)
	}
}

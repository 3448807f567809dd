package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestFailedRestoreOfRemovedBackendIsRetriedAtExit: with restore_on_exit, a
// backend a reload removes while its HAProxy cannot be reached keeps the
// daemon's weights (a drain included); the exit must try it again, as it
// does every backend still configured, rather than leave them for good and
// exit 0.
func TestFailedRestoreOfRemovedBackendIsRetriedAtExit(t *testing.T) {
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
backend be
  balance roundrobin
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 20
backend kept
  balance roundrobin
  server k1 127.0.0.1:%d weight 30
`, testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)))
	parse := func(backends ...string) *config.Config {
		yml := fmt.Sprintf("listen: \"\"\ninterval: 1h\nrestore_on_exit: true\nhaproxy: {socket: %s, timeout: 2s}\nbackends:\n", h.Socket)
		for _, b := range backends {
			yml += fmt.Sprintf("  - name: %s\n    source: {haproxy: {counter: bytes_in}}\n", b)
		}
		cfg, err := config.Parse("test.yml", []byte(yml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var logs testenv.SyncBuffer
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(parse("be", "kept"), Options{Notifier: n, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Reload: func() (*config.Config, error) { return parse("kept"), nil }})
	r := startDaemon(t, d, n)
	waitFor(t, "start-up weights of both backends", func() bool {
		return d.startWeights.has("be") && d.startWeights.has("kept")
	})
	hc, err := haproxy.New(haproxy.Config{Socket: h.Socket, Timeout: duration.Duration(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The daemon's drain, as its cycles would write it.
	if err := hc.Backend("be").SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 0}}); err != nil {
		t.Fatal(err)
	}
	// HAProxy's socket out of reach during the reload (HAProxy keeps listening on it).
	away := h.Socket + ".away"
	if err := os.Rename(h.Socket, away); err != nil {
		t.Fatal(err)
	}
	r.hup <- syscall.SIGHUP
	waitFor(t, "the reload", func() bool { return strings.Contains(logs.String(), "config reloaded") })
	if !strings.Contains(logs.String(), `msg="restore of a backend removed by the reload failed`) {
		t.Fatalf("the restore at the reload did not fail:\n%s", logs.String())
	}
	if err := os.Rename(away, h.Socket); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if got := mustWeights(ctx, t, hc.Backend("be")); got["s1"] != 10 || got["s2"] != 20 {
		t.Errorf("be after exit: %v, want its start-up weights s1=10 s2=20 back", got)
	}
}

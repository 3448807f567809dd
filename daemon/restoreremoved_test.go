package daemon

import (
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestFailedRestoreOfRemovedBackendIsRetriedAtExit: with restore_on_exit, a
// backend a reload removes while its HAProxy cannot be reached keeps the
// daemon's weights (a drain included); the exit must try it again, as it
// does every backend still configured, rather than leave them for good and
// exit 0.
func TestFailedRestoreOfRemovedBackendIsRetriedAtExit(t *testing.T) {
	h := startTwoServersAndKept(t)
	parse := func(backends ...string) *config.Config {
		return restoreBackendsConfig(t, h.Socket, "1h", "2s", backends...)
	}
	var logs testenv.SyncBuffer
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(parse("be", "kept"), Options{Notifier: n, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Reload: func() (*config.Config, error) { return parse("kept"), nil }})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "start-up weights of both backends", func() bool {
		return d.startWeights.has("be") && d.startWeights.has("kept")
	})
	hc, ctx := restoreClient(t, d, h.Socket)
	// The daemon's drain, as its cycles would write it.
	mustSetWeights(ctx, t, hc.Backend("be"), weighter.Change{Server: "s1", Weight: 0})
	// HAProxy's socket out of reach during the reload (HAProxy keeps listening on it).
	away := h.Socket + ".away"
	if err := os.Rename(h.Socket, away); err != nil {
		t.Fatal(err)
	}
	r.hup <- syscall.SIGHUP
	testenv.WaitFor(t, "the reload", func() bool { return strings.Contains(logs.String(), "config reloaded") })
	if !strings.Contains(logs.String(), `msg="restore failed" backend=be restore="restore of a backend removed by the reload"`) {
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

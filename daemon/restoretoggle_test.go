package daemon

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// restore_on_exit turned off by a reload and on again by a later one keeps
// the weights of that moment, as the documentation says, not the ones kept
// before it was off: the exit must not put back weights from before a
// stretch in which the daemon promised nothing.
func TestRestoreOnExitTurnedOnAgainKeepsTheWeightsOfThatMoment(t *testing.T) {
	h := startTwoServers(t)
	on := restoreConfig(t, h.Socket, "1h", "2s")
	var restore atomic.Bool
	var logs testenv.SyncBuffer
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(on, Options{Notifier: n, Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Reload: func() (*config.Config, error) {
			cfg := restoreConfig(t, h.Socket, "1h", "2s")
			cfg.RestoreOnExit = restore.Load()
			return cfg, nil
		}})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "the start-up weights", func() bool { return d.startWeights.has("be") })
	reload := func(i int) {
		r.hup <- syscall.SIGHUP
		testenv.WaitFor(t, "the reload", func() bool { return strings.Count(logs.String(), "config reloaded") == i })
	}
	reload(1) // off
	// The new unit's start check writes a weight back as it read it: let it
	// pass before the weights change.
	testenv.WaitFor(t, "the start-up read after the reload", func() bool { return strings.Count(logs.String(), `msg="current weights"`) == 2 })
	hc, ctx := restoreClient(t, d, h.Socket)
	mustSetWeights(ctx, t, hc.Backend("be"), weighter.Change{Server: "s1", Weight: 5})
	restore.Store(true)
	reload(2) // on again: keeps s1=5 s2=20 at the backend's first read
	testenv.WaitFor(t, "the start-up weights kept again", func() bool { return d.startWeights.has("be") })
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := mustWeights(ctx, t, hc.Backend("be")); got["s1"] != 5 || got["s2"] != 20 {
		t.Errorf("be after exit: %v, want the weights when restore_on_exit was turned on again, s1=5 s2=20", got)
	}
}

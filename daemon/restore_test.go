package daemon

import (
	"context"
	"fmt"
	"log/slog"
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

// TestRestoreAfterHAProxyCameUpLate: with restore_on_exit, a daemon started
// while HAProxy is down (boot order, HAProxy restarting) must still take the
// start-up weights once HAProxy answers, before it writes anything, and put
// them back on exit.
func TestRestoreAfterHAProxyCameUpLate(t *testing.T) {
	h := startTwoServers(t)
	h.Kill()
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(restoreConfig(t, h.Socket, "100ms", "2s"), Options{Notifier: n})
	r := startDaemon(t, d, n)

	h.Restart()
	testenv.WaitFor(t, "the start-up weights, read once HAProxy answers", func() bool {
		return d.startWeights.has("be")
	})
	hc, wctx := restoreClient(t, d, h.Socket)
	b := hc.Backend("be")
	// As the daemon's cycles would (this source holds for its rate window).
	mustSetWeights(wctx, t, b, weighter.Change{Server: "s1", Weight: 77})
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := mustWeights(wctx, t, b); got["s1"] != 10 || got["s2"] != 20 {
		t.Errorf("weights after exit %v, want the start-up s1=10 s2=20", got)
	}
}

// TestShutdownEndsWithHungHAProxy: SIGTERM with restore_on_exit while HAProxy
// accepts connections and never answers (stopped, swapping, overloaded) must
// end, after the socket timeout, with an error naming the backend.
func TestShutdownEndsWithHungHAProxy(t *testing.T) {
	h := startTwoServers(t)
	var logs testenv.SyncBuffer
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(restoreConfig(t, h.Socket, "1h", "100ms"), Options{Notifier: n, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "the start-up weights", func() bool {
		return d.startWeights.has("be")
	})
	h.Freeze()
	defer h.Thaw() // before t.Cleanup stops it
	r.cancel()
	testenv.WaitFor(t, "Run to return", func() bool {
		select {
		case <-r.done:
			return true
		default:
			return false
		}
	})
	if r.err == nil || !strings.Contains(r.err.Error(), "restore_on_exit: backend be:") {
		t.Errorf("Run returned %v, want the failed restore of be (the process must exit non-zero)", r.err)
	}
	if !strings.Contains(logs.String(), `msg="restore failed" backend=be restore=restore_on_exit`) {
		t.Errorf("no restore error naming the backend:\n%s", logs.String())
	}
}

// TestRestoreFailureFailsTheExit: with restore_on_exit, SIGTERM while HAProxy
// is down leaves the daemon's weights in place; Run must return an error
// naming the backend, so the process exits non-zero, and log it.
func TestRestoreFailureFailsTheExit(t *testing.T) {
	h := startTwoServers(t)
	var logs testenv.SyncBuffer
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(restoreConfig(t, h.Socket, "1h", "2s"), Options{Notifier: n, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "the start-up weights", func() bool {
		return d.startWeights.has("be")
	})
	h.Kill()
	err := r.stop()
	if err == nil || !strings.Contains(err.Error(), "restore_on_exit: backend be:") {
		t.Errorf("Run returned %v, want the failed restore of be", err)
	}
	if !strings.Contains(logs.String(), `level=ERROR msg="restore failed" backend=be restore=restore_on_exit`) {
		t.Errorf("no restore error naming the backend:\n%s", logs.String())
	}
}

// startTwoServers starts HAProxy with backend be: s1 weight 10, s2 weight 20.
func startTwoServers(t *testing.T) *testenv.HAProxy {
	t.Helper()
	return testenv.StartHAProxy(t, testenv.HAProxyDefaults+twoServersBackend(t))
}

// startTwoServersAndKept starts HAProxy with backend be as startTwoServers
// does and backend kept: k1 weight 30.
func startTwoServersAndKept(t *testing.T) *testenv.HAProxy {
	t.Helper()
	return testenv.StartHAProxy(t, testenv.HAProxyDefaults+twoServersBackend(t)+fmt.Sprintf(`backend kept
  balance roundrobin
  server k1 127.0.0.1:%d weight 30
`, testenv.FreePort(t)))
}

// twoServersBackend is backend be: s1 weight 10, s2 weight 20, on free ports.
func twoServersBackend(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf(`
backend be
  balance roundrobin
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 20
`, testenv.FreePort(t), testenv.FreePort(t))
}

// restoreConfig is backend be on socket, with restore_on_exit, the HAProxy
// stats source (it holds for its rate window, so the daemon writes nothing).
func restoreConfig(t *testing.T, socket, interval, socketTimeout string) *config.Config {
	t.Helper()
	return restoreBackendsConfig(t, socket, interval, socketTimeout, "be")
}

// restoreBackendsConfig is restoreConfig for each of backends.
func restoreBackendsConfig(t *testing.T, socket, interval, socketTimeout string, backends ...string) *config.Config {
	t.Helper()
	yml := fmt.Sprintf("listen: \"\"\ninterval: %s\nrestore_on_exit: true\nhaproxy: {socket: %s, timeout: %s}\nbackends:\n", interval, socket, socketTimeout)
	for _, b := range backends {
		yml += fmt.Sprintf("  - name: %s\n    source: {haproxy: {counter: bytes_in}}\n", b)
	}
	cfg, err := config.Parse("test.yml", []byte(yml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// restoreClient is a client of the HAProxy on socket, to write and read
// weights beside the daemon d as its cycles would (its drains go into d's
// record of its own), and a context for its calls that ends with the test.
func restoreClient(t *testing.T, d *Daemon, socket string) (*haproxy.Client, context.Context) {
	t.Helper()
	hc, err := haproxy.New(haproxy.Config{Socket: socket, Timeout: duration.Duration(5 * time.Second)}, haproxy.OwnZeroes(d.zeroes))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return hc, ctx
}

// mustSetWeights writes changes to target as the daemon's cycles would
// (the sources in these tests hold, so the daemon writes nothing itself).
func mustSetWeights(ctx context.Context, t *testing.T, target weighter.Target, changes ...weighter.Change) {
	t.Helper()
	if err := target.SetWeights(ctx, changes); err != nil {
		t.Fatal(err)
	}
}

// TestReloadRestoresRemovedBackend: with restore_on_exit, a backend that a
// reload removes gets its start-up weights back at once — the daemon lets go
// of it, and its weights (drains included) must not outlive that — while the
// backends still configured keep the daemon's.
func TestReloadRestoresRemovedBackend(t *testing.T) {
	h := startTwoServersAndKept(t)
	parse := func(backends ...string) *config.Config {
		return restoreBackendsConfig(t, h.Socket, "100ms", "2s", backends...)
	}
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(parse("be", "kept"), Options{Notifier: n, Reload: func() (*config.Config, error) { return parse("kept"), nil }})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "start-up weights of both backends", func() bool {
		return d.startWeights.has("be") && d.startWeights.has("kept")
	})

	hc, wctx := restoreClient(t, d, h.Socket)
	// As the daemon's cycles would (this source holds for its rate window).
	for backend, ch := range map[string]weighter.Change{"be": {Server: "s1", Weight: 0}, "kept": {Server: "k1", Weight: 5}} {
		mustSetWeights(wctx, t, hc.Backend(backend), ch)
	}
	r.hup <- syscall.SIGHUP
	weights := func(backend string) map[string]int { return mustWeights(wctx, t, hc.Backend(backend)) }
	// The snapshot is dropped just after the write: wait for both.
	testenv.WaitFor(t, "be's start-up weights back and its snapshot dropped after the reload removed it", func() bool {
		kept := d.startWeights.has("be")
		got := weights("be")
		return !kept && got["s1"] == 10 && got["s2"] == 20
	})
	if got := weights("kept"); got["k1"] != 5 {
		t.Errorf("the backend still configured: k1 = %d, want the daemon's 5 left alone", got["k1"])
	}
}

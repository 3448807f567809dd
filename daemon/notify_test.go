package daemon

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSystemdNotifier sends to a real unixgram NOTIFY_SOCKET, as systemd listens.
func TestSystemdNotifier(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	(&SystemdNotifier{}).Notify("READY=1")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("got %q, %v", buf[:n], err)
	}
}

// TestWatchdogFeedsWhileAlive fires the watchdog's timer by hand: WATCHDOG=1
// while the runners cycle, nothing once a runner has been silent too long.
func TestWatchdogFeedsWhileAlive(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "2000000")
	f := newFixture(t)
	n := &recordingNotifier{ready: make(chan struct{})}
	var logs strings.Builder
	d := New(testConfig(t, "be"), Options{Notifier: n, Clock: f.clock, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	d.group = &group{runners: []*runner{f.r}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.watchdog(ctx); close(done) }()

	if w := <-f.clock.Waits(); w != time.Second {
		t.Fatalf("watchdog period %s, want half of 2s", w)
	}
	f.clock.Fire()
	<-f.clock.Waits()          // the next wait starts after the notification
	f.clock.Advance(time.Hour) // the runner has not cycled for an hour
	f.clock.Fire()
	<-f.clock.Waits()
	cancel()
	<-done
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.states) != 1 || n.states[0] != "WATCHDOG=1" {
		t.Errorf("notifications %v, want one WATCHDOG=1", n.states)
	}
	// At 3 a.m. the log must say which backend is stuck, and since when.
	if !strings.Contains(logs.String(), "backend=be") || !strings.Contains(logs.String(), "last_cycle_end=") {
		t.Errorf("the watchdog log does not name the stuck backend:\n%s", logs.String())
	}
}

// TestSystemdNotifierSaysAFailureOnce: a NOTIFY_SOCKET that cannot be reached
// (systemd re-executing, a container that passes the variable and not the
// socket) fails every watchdog ping: the log says so once, and again when
// it works, not at WARN twice a minute for ever.
func TestSystemdNotifierSaysAFailureOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	t.Setenv("NOTIFY_SOCKET", path) // nothing listens there yet
	var logs strings.Builder
	n := &SystemdNotifier{Log: slog.New(slog.NewTextHandler(&logs, nil))}
	for range 5 {
		n.Notify("WATCHDOG=1")
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n.Notify("WATCHDOG=1")
	if got := strings.Count(logs.String(), "level=WARN"); got != 1 {
		t.Errorf("%d warnings for 5 failed notifications, want 1:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "connect: no such file or directory") {
		t.Errorf("the warning does not give the cause:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `level=INFO msg="sd_notify works again"`) {
		t.Errorf("the recovery is not said:\n%s", logs.String())
	}
}

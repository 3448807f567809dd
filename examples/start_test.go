package examples

import (
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// startLogged starts cmd with its standard output and error in one buffer.
func startLogged(t *testing.T, cmd *exec.Cmd) *testenv.SyncBuffer {
	t.Helper()
	var logs testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &logs
}

// startWaited is startLogged for a test that waits for the exit itself:
// cmd.Wait's result arrives on waited, and kill, to be deferred, ends a
// process the test left before it exited.
func startWaited(t *testing.T, cmd *exec.Cmd) (logs *testenv.SyncBuffer, waited <-chan error, kill func()) {
	t.Helper()
	logs = startLogged(t, cmd)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return logs, exited, func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}
}

// listenNotify is a datagram socket at path for sd_notify messages, as
// systemd's NOTIFY_SOCKET.
func listenNotify(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// checkStopsOnSIGTERM sends SIGTERM to the daemon started by startWaited and
// checks that it says STOPPING=1 on conn and exits cleanly within 20 s; who
// names it in the failures.
func checkStopsOnSIGTERM(t *testing.T, who string, cmd *exec.Cmd, conn *net.UnixConn, waited <-chan error, logs *testenv.SyncBuffer) {
	t.Helper()
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	msgs := readNotify(t, conn, 20*time.Second, func(seen []string) bool { return count(seen, "STOPPING=1") > 0 })
	if count(msgs, "STOPPING=1") == 0 {
		t.Errorf("%s: no STOPPING=1 after SIGTERM, got %q", who, msgs)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("%s: exit after SIGTERM: %v\nlogs:\n%s", who, err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no exit after SIGTERM\nlogs:\n%s", who, logs.String())
	}
}

// startAppHAProxy is a real HAProxy with backend be_app: two servers, both a
// discard server, balanced leastconn.
func startAppHAProxy(t *testing.T) *testenv.HAProxy {
	t.Helper()
	sink := testenv.StartDiscardServer(t)
	return testenv.StartHAProxy(t, testenv.HAProxyDefaults+`
backend be_app
  balance leastconn
  server s1 `+sink+`
  server s2 `+sink+`
`)
}

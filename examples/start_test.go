package examples

import (
	"os/exec"
	"testing"

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

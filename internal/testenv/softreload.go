package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ReloadSoft reloads haproxy as a reload without a master does (the init
// scripts' `haproxy -f cfg -sf <pid>`): a new process starts with -sf naming
// the running one, which then stops listening and serves the connections it
// has until they end. It returns the old process's pid once the runtime
// socket is the new process's. The old process is stopped at the test's end
// if it still runs.
func (h *HAProxy) ReloadSoft() int {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.exited == nil {
		h.t.Fatal("reload: haproxy is not running")
	}
	old, oldExited := h.cmd, h.exited
	oldPID := old.Process.Pid
	h.t.Cleanup(func() { stopProcess(old, oldExited, syscall.SIGTERM) })
	h.log = &SyncBuffer{}
	h.cmd = exec.Command(h.binary, "-f", h.Config, "-db", "-sf", strconv.Itoa(oldPID))
	h.cmd.Stdout, h.cmd.Stderr = h.log, h.log
	if err := h.cmd.Start(); err != nil {
		h.t.Fatalf("reload haproxy %s: %v", h.Version, err)
	}
	exited := make(chan error, 1)
	go func(c *exec.Cmd) { exited <- c.Wait() }(h.cmd)
	h.exited = exited
	deadline := time.Now().Add(10 * time.Second) // a bound on a hang, not a speed check
	for infoPID(h.Socket) != h.cmd.Process.Pid {
		select {
		case err := <-exited:
			h.exited = nil
			h.t.Fatalf("haproxy %s exited on reload: %v\n%s", h.Version, err, h.log.String())
		default:
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("haproxy %s: the runtime socket is not the new process's 10 s after the reload\n%s", h.Version, h.log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for an outcome
	}
	return oldPID
}

// infoPID is the Pid `show info` on the runtime socket says, 0 when it
// does not answer.
func infoPID(path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return 0
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprint(c, "show info\n"); err != nil {
		return 0
	}
	out, _ := io.ReadAll(c)
	for line := range strings.SplitSeq(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid: "); ok {
			pid, _ := strconv.Atoi(strings.TrimSpace(v))
			return pid
		}
	}
	return 0
}

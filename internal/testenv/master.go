package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// HAProxyMaster is haproxy in master-worker mode (`haproxy -W -S`) started by
// StartHAProxyMaster: a master process with its master CLI, and a worker
// without a stats socket of its own. It is stopped by t.Cleanup.
type HAProxyMaster struct {
	// Socket is the master CLI's unix socket.
	Socket string
	// Config is the path of the configuration file.
	Config string
	// Version is the HAProxy branch running ("2.6", "3.0", …: HAProxyVersions).
	Version string

	t      testing.TB
	mu     sync.Mutex
	cmd    *exec.Cmd
	log    *SyncBuffer
	exited chan error
}

// StartHAProxyMaster writes cfg (defaults, frontends, backends; no global
// stats socket) and starts `haproxy -W -S <socket> -db` (DefaultHAProxyVersion,
// Debian 12's). It fails the test when the binary is missing, and returns once
// the master CLI lists a worker.
func StartHAProxyMaster(t testing.TB, cfg string) *HAProxyMaster {
	t.Helper()
	return StartHAProxyMasterVersion(t, DefaultHAProxyVersion, cfg)
}

// StartHAProxyMasterVersion is StartHAProxyMaster with HAProxy version, one
// of HAProxyVersions. A version that is not there fails the test, saying how
// to fetch it. Reload works on every version: the fetched ones' wrappers
// make themselves the program's argv[0], which the master re-executes.
func StartHAProxyMasterVersion(t testing.TB, version, cfg string) *HAProxyMaster {
	t.Helper()
	binary := HAProxyBinary(t, version)
	dir := t.TempDir()
	h := &HAProxyMaster{Socket: filepath.Join(dir, "master.sock"), Config: filepath.Join(dir, "haproxy.cfg"),
		Version: version, t: t, log: &SyncBuffer{}}
	if err := os.WriteFile(h.Config, []byte(cfg), 0o600); err != nil {
		t.Fatalf("write haproxy config: %v", err)
	}
	h.cmd = exec.Command(binary, "-W", "-S", h.Socket+",mode,600", "-f", h.Config, "-db")
	h.cmd.Stdout, h.cmd.Stderr = h.log, h.log
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start haproxy: %v", err)
	}
	h.exited = make(chan error, 1)
	go func(c *exec.Cmd) { h.exited <- c.Wait() }(h.cmd)
	t.Cleanup(h.Stop)
	h.waitWorker(0)
	return h
}

// Worker is the pid of the current worker, as the master CLI's `show proc`
// lists it; 0 when it lists none or does not answer.
func (h *HAProxyMaster) Worker() int {
	out, err := h.command("show proc")
	if err != nil {
		return 0
	}
	section := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "#") {
			section = line
			continue
		}
		f := strings.Fields(line)
		if section == "# workers" && len(f) >= 2 && f[1] == "worker" {
			pid, _ := strconv.Atoi(f[0])
			return pid
		}
	}
	return 0
}

// Reload sends SIGUSR2 to the master, as `systemctl reload haproxy` does, and
// returns the new worker's pid once the master lists it as current.
func (h *HAProxyMaster) Reload() int {
	h.t.Helper()
	old := h.Worker()
	h.SignalReload()
	return h.waitWorker(old)
}

// SignalReload sends SIGUSR2 to the master and returns at once: a reload
// that fails (a broken configuration file) starts no worker to wait for.
func (h *HAProxyMaster) SignalReload() {
	h.t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		h.t.Fatalf("reload haproxy: %v", err)
	}
}

// waitWorker polls until the master lists a current worker other than old
// and that worker answers through the master as @1. From 3.2 on, `show proc`
// lists a new worker while it still loads, and `@1 <command>` then answers
// "Can't find the target PID matching the prefix '@1'" and holds the
// connection open: a test must not start before the worker answers.
func (h *HAProxyMaster) waitWorker(old int) int {
	h.t.Helper()
	// A bound on a hang, not a speed check: 2.6 takes 18 s to parse the
	// 20,000-server configuration of TestMasterCLIWorkerDiesMidReply on a
	// loaded machine (load average 20 on 2 cores), and lists its worker after.
	const limit = 60 * time.Second
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-h.exited:
			h.exited <- err
			h.t.Fatalf("haproxy exited: %v\n%s", err, h.log.String())
		default:
		}
		if pid := h.Worker(); pid != 0 && pid != old && h.answers(pid) {
			return pid
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for an outcome
	}
	h.t.Fatalf("no new haproxy worker (old %d) answering after %s:\n%s", old, limit, h.log.String())
	return 0
}

// answers reports whether worker pid answers `show info` through the master as @1.
func (h *HAProxyMaster) answers(pid int) bool {
	// Short: a still-loading worker's @1 holds the connection until the deadline.
	out, err := h.commandWithin("@1 show info", time.Second)
	return err == nil && strings.Contains(out, fmt.Sprintf("\nPid: %d\n", pid))
}

// command sends one command to the master CLI and returns its reply.
func (h *HAProxyMaster) command(cmd string) (string, error) {
	return h.commandWithin(cmd, 2*time.Second)
}

// commandWithin is command with the whole exchange bounded by limit.
func (h *HAProxyMaster) commandWithin(cmd string, limit time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", h.Socket)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(limit))
	// The master keeps the connection open after a command it passed to a
	// worker: quit closes it.
	if _, err := fmt.Fprintf(c, "%s\nquit\n", cmd); err != nil {
		return "", err
	}
	out, err := io.ReadAll(c)
	return string(out), err
}

// Command sends one command to the master CLI (`@1 show stat`, `show proc`)
// and returns its reply, failing the test when the CLI does not answer.
func (h *HAProxyMaster) Command(cmd string) string {
	h.t.Helper()
	out, err := h.command(cmd)
	if err != nil {
		h.t.Fatalf("master CLI %q: %v", cmd, err)
	}
	return out
}

// Log is what haproxy has written so far.
func (h *HAProxyMaster) Log() string { return h.log.String() }

// Stop terminates the master (SIGTERM), which stops its workers, and waits.
func (h *HAProxyMaster) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil || h.exited == nil {
		return
	}
	stopProcess(h.cmd, h.exited, syscall.SIGTERM)
	h.exited = nil
}

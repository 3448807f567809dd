// Package testenv starts the real daemons the integration tests talk to
// (HAProxy, Prometheus, Graphite) on 127.0.0.1, on free ports, in t.TempDir().
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// HAProxyDefaults is a TCP-mode defaults section with short timeouts that test
// configurations can start with.
const HAProxyDefaults = `
defaults
  mode tcp
  timeout connect 2s
  timeout client 30s
  timeout server 30s
`

// HAProxy is a running haproxy -db started by StartHAProxy. It is stopped by
// t.Cleanup.
type HAProxy struct {
	// Socket is the admin-level unix runtime socket.
	Socket string
	// TCPSocket is the same admin runtime API on 127.0.0.1:port.
	TCPSocket string
	// Config is the path of the configuration file.
	Config string
	// Version is the HAProxy branch running ("2.6", "3.0", …: HAProxyVersions).
	Version string

	t      testing.TB
	binary string
	mu     sync.Mutex
	cmd    *exec.Cmd
	log    *SyncBuffer
	exited chan error // receives the process's exit once
}

// StartHAProxy writes a global section with the admin sockets, followed by cfg
// (defaults, frontends, backends: use FreePort for their ports), and starts
// haproxy (DefaultHAProxyVersion, Debian 12's) in the foreground. It fails the
// test, with an install hint, when the binary is missing, and waits until the
// runtime socket answers.
func StartHAProxy(t testing.TB, cfg string) *HAProxy {
	t.Helper()
	return StartHAProxyVersion(t, DefaultHAProxyVersion, cfg)
}

// StartHAProxyVersion is StartHAProxy with HAProxy version, one of
// HAProxyVersions. A version that is not there fails the test, saying how
// to fetch it.
func StartHAProxyVersion(t testing.TB, version, cfg string) *HAProxy {
	t.Helper()
	binary := HAProxyBinary(t, version)
	dir := t.TempDir()
	h := &HAProxy{
		Socket:    filepath.Join(dir, "admin.sock"),
		TCPSocket: fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		Config:    filepath.Join(dir, "haproxy.cfg"),
		Version:   version,
		t:         t,
		binary:    binary,
	}
	global := fmt.Sprintf("global\n  stats socket %s mode 600 level admin\n  stats socket ipv4@%s level admin\n",
		h.Socket, h.TCPSocket)
	if err := os.WriteFile(h.Config, []byte(global+cfg), 0o600); err != nil {
		t.Fatalf("write haproxy config: %v", err)
	}
	h.start()
	t.Cleanup(h.Stop)
	return h
}

func (h *HAProxy) start() {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = &SyncBuffer{}
	h.cmd = exec.Command(h.binary, "-f", h.Config, "-db")
	h.cmd.Stdout, h.cmd.Stderr = h.log, h.log
	if err := h.cmd.Start(); err != nil {
		h.t.Fatalf("start haproxy %s: %v", h.Version, err)
	}
	exited := make(chan error, 1)
	go func(c *exec.Cmd) { exited <- c.Wait() }(h.cmd)
	if err := waitSocket(h.Socket, exited, 10*time.Second); err != nil {
		_ = h.cmd.Process.Kill()
		h.t.Fatalf("haproxy %s did not come up: %v\n%s", h.Version, err, h.log.String())
	}
	h.exited = exited
}

// Kill stops haproxy abruptly (SIGKILL), as a crash would: the socket stops
// answering and runtime weights are lost.
func (h *HAProxy) Kill() {
	h.t.Helper()
	h.signal(syscall.SIGKILL)
}

// Restart kills haproxy and starts it again from the same configuration, as a
// restart by the operator does: runtime weights go back to the configured ones.
func (h *HAProxy) Restart() {
	h.t.Helper()
	h.signal(syscall.SIGKILL)
	h.start()
}

// Stop terminates haproxy (SIGTERM) and waits for it; t.Cleanup calls it.
func (h *HAProxy) Stop() {
	h.signal(syscall.SIGTERM)
}

// PID is the process id of the running haproxy (0 when stopped).
func (h *HAProxy) PID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.exited == nil {
		return 0
	}
	return h.cmd.Process.Pid
}

// Freeze stops haproxy (SIGSTOP) as a hung process: its sockets accept
// connections and never answer. It returns once every thread is stopped: the
// signal is only acted on when each thread next enters the kernel, and a
// thread that answers one more request after kill(2) returned would make the
// test see a live HAProxy. Thaw undoes it; call it before the test ends.
func (h *HAProxy) Freeze() {
	h.t.Helper()
	pid := h.PID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		h.t.Fatalf("freeze haproxy: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !allThreadsStopped(pid) {
		if time.Now().After(deadline) {
			h.t.Fatalf("haproxy (pid %d) not stopped 5 s after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// Thaw resumes a frozen haproxy (SIGCONT).
func (h *HAProxy) Thaw() {
	_ = syscall.Kill(h.PID(), syscall.SIGCONT)
}

// allThreadsStopped reports whether every thread of pid is in state T
// (stopped), from /proc/pid/task/*/stat.
func allThreadsStopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		// "pid (comm) S ...": the state follows the last ')', comm may hold any character.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

// Log returns what haproxy printed since it was last started.
func (h *HAProxy) Log() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.String()
}

// signal sends sig and waits for the process to exit (SIGKILL after 5 s).
func (h *HAProxy) signal(sig syscall.Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.exited == nil {
		return
	}
	stopProcess(h.cmd, h.exited, sig)
	h.exited = nil
}

// stopProcess sends sig to cmd and waits until exited says it ended
// (SIGKILL after 5 s).
func stopProcess(cmd *exec.Cmd, exited <-chan error, sig syscall.Signal) {
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// waitSocket polls until the runtime socket answers "show info" or haproxy exits.
func waitSocket(path string, exited <-chan error, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("haproxy exited: %v", err)
		default:
		}
		if showInfo(path) == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for an outcome
	}
	return fmt.Errorf("runtime socket %s not answering after %s", path, limit)
}

func showInfo(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("show info\n")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	_, err = c.Read(buf)
	return err
}

// SyncBuffer is a bytes.Buffer safe for a writer goroutine (exec's copy of a
// child's output) and a reading test at once.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
)

// maxconnSpare is how many connections HAProxy accepts beyond the measured ones: the probe,
// the runtime socket's, slack.
const maxconnSpare = 64

// haproxyConfig is the measured HAProxy: frontend fe to backend be (the servers the reads are
// about), fe_probe to be_probe (the echo server the probe's round trips go through). Long
// timeouts: the connections must outlive the run, and each sends only every few seconds.
func haproxyConfig(socket string, nbthread, conns int, front, probeFront int, servers []string, echo string) string {
	maxconn := conns + maxconnSpare
	var b strings.Builder
	fmt.Fprintf(&b, `global
  stats socket %s mode 600 level admin
  stats timeout 2m
  nbthread %d
  maxconn %d
defaults
  mode tcp
  maxconn %d
  timeout connect 5s
  timeout client 10m
  timeout server 10m
frontend fe
  bind 127.0.0.1:%d
  default_backend be
frontend fe_probe
  bind 127.0.0.1:%d
  default_backend be_probe
backend be_probe
  server echo %s
backend be
  balance leastconn
`, socket, nbthread, maxconn, maxconn, front, probeFront, echo)
	for i, s := range servers {
		fmt.Fprintf(&b, "  server s%d %s\n", i+1, s)
	}
	return b.String()
}

// haproxyProc is a running `haproxy -db`.
type haproxyProc struct {
	socket string
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan error
}

// startHAProxy writes cfg into dir and starts HAProxy in the foreground; it returns once the
// runtime socket answers a `show stat` of backend be.
func startHAProxy(ctx context.Context, binary, dir, socket, cfg string) (*haproxyProc, error) {
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, fmt.Errorf("write haproxy config: %w", err)
	}
	h := &haproxyProc{socket: socket, log: &syncBuffer{}, exited: make(chan error, 1)}
	h.cmd = exec.Command(binary, "-f", path, "-db")
	h.cmd.Stdout, h.cmd.Stderr = h.log, h.log
	// HAProxy dies with this process, even killed: an unattended run leaves nothing behind.
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := h.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	go func() { h.exited <- h.cmd.Wait() }()
	if err := h.waitReady(ctx); err != nil {
		h.stop()
		return nil, fmt.Errorf("haproxy did not come up: %w\n%s", err, h.log.String())
	}
	return h, nil
}

func (h *haproxyProc) waitReady(ctx context.Context) error {
	c, err := haproxy.New(haproxy.Config{Socket: h.socket})
	if err != nil {
		return err
	}
	limit := time.Now().Add(15 * time.Second)
	for {
		_, err := c.Stats(ctx, "be")
		if err == nil {
			return nil
		}
		select {
		case e := <-h.exited:
			h.exited <- e
			return fmt.Errorf("exited: %v", e)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(limit) {
			return err
		}
	}
}

func (h *haproxyProc) pid() int { return h.cmd.Process.Pid }

// alive fails once HAProxy has exited.
func (h *haproxyProc) alive() error {
	select {
	case e := <-h.exited:
		h.exited <- e
		return fmt.Errorf("haproxy exited: %v\n%s", e, h.log.String())
	default:
		return nil
	}
}

// stop terminates HAProxy and waits for it (SIGKILL after 10 s).
func (h *haproxyProc) stop() {
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case e := <-h.exited:
		h.exited <- e
	case <-time.After(10 * time.Second):
		_ = h.cmd.Process.Kill()
		e := <-h.exited
		h.exited <- e
	}
}

// cpu is HAProxy's CPU time so far, every thread's user and system time.
func (h *haproxyProc) cpu() (time.Duration, error) {
	return processCPU(h.pid())
}

// processCPU is the CPU time, user and system, of every thread of process pid so far: its
// CPU-time clock (clock_getcpuclockid(3): MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)), exact to
// the nanosecond and current for a thread on a CPU at that moment. /proc/<pid>/stat's
// utime+stime count in 10 ms ticks, too coarse for reads that cost HAProxy a fraction of one.
func processCPU(pid int) (time.Duration, error) {
	const cpuclockSched = 2
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(^pid<<3|cpuclockSched), &ts); err != nil {
		return 0, fmt.Errorf("cpu time of %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

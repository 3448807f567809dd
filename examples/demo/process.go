package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is a process the demo started (HAProxy, the weighter). It runs in its own
// process group, so a Ctrl-C in the terminal reaches only the demo, which then stops
// its children in order; and it gets SIGKILL if the demo itself dies, so nothing is
// ever left behind.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startChild starts bin with args, its output appended to logPath.
func startChild(name, logPath, bin string, args ...string) (*child, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		log.Close()
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the process has ended (with its error) without waiting.
func (c *child) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs; it always reaps the process.
func (c *child) stop(grace time.Duration) {
	if ok, _ := c.exited(); ok {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// waitReady polls check until it succeeds, the process dies, or ctx ends.
func (c *child) waitReady(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if ok, werr := c.exited(); ok {
			return fmt.Errorf("%s exited: %v (last check: %w)", c.name, werr, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w", c.name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

package loadlab

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Child is a process the program started (HAProxy, the weighter, Prometheus). It runs
// in its own process group, so a Ctrl-C in the terminal reaches only the program, which
// then stops its children in order; and it gets SIGKILL if the program itself dies, so
// nothing is ever left behind.
type Child struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartChild starts bin with args, its output written to logPath.
func StartChild(name, logPath, bin string, args ...string) (*Child, error) {
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
	c := &Child{Name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		log.Close()
		close(c.done)
	}()
	return c, nil
}

// Exited reports whether the process has ended (with its error) without waiting.
func (c *Child) Exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, waits up to grace, then SIGKILLs; it always reaps the process.
func (c *Child) Stop(grace time.Duration) {
	if ok, _ := c.Exited(); ok {
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

// WaitReady polls check until it succeeds, the process dies, or ctx ends.
func (c *Child) WaitReady(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if ok, werr := c.Exited(); ok {
			return fmt.Errorf("%s exited: %v (last check: %w)", c.Name, werr, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w", c.Name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// HTTPOK is a readiness check for WaitReady: it succeeds when url answers 200.
func HTTPOK(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

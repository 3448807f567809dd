package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// errExited says a child process ended before it was asked to.
var errExited = errors.New("exited")

// child is a running role process (roles.go), seen from the parent.
type child struct {
	role   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string // its stdout, line by line; closed at EOF
	stderr *syncBuffer
	exited chan struct{}
}

// startChild runs this binary again in role with args.
func startChild(role string, args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", role, err)
	}
	c := &child{role: role, lines: make(chan string, 64), stderr: &syncBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(exe, args...)
	c.cmd.Env = append(os.Environ(), roleEnv+"="+role)
	c.cmd.Stderr = c.stderr
	// Dies with this process, even killed: an unattended run leaves nothing behind.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start %s: %w", role, err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", role, err)
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", role, err)
	}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			c.lines <- s.Text()
		}
		close(c.lines)
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// line returns the child's next output line, waiting at most limit.
func (c *child) line(ctx context.Context, limit time.Duration) (string, error) {
	select {
	case l, ok := <-c.lines:
		if !ok {
			<-c.exited
			return "", fmt.Errorf("%s process %w: %s", c.role, errExited, c.stderr.String())
		}
		return l, nil
	case <-time.After(limit):
		return "", fmt.Errorf("%s process: no answer within %s: %s", c.role, limit, c.stderr.String())
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// send writes one command line to the child.
func (c *child) send(cmd string) error {
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		return fmt.Errorf("%s process: %w: %s", c.role, err, c.stderr.String())
	}
	return nil
}

// stop closes the child's stdin, which ends it, and waits (SIGKILL after 5 s).
func (c *child) stop() {
	_ = c.in.Close()
	select {
	case <-c.exited:
		return
	case <-time.After(5 * time.Second):
	}
	_ = c.cmd.Process.Kill()
	for range c.lines { // let the reader goroutine reach Wait
	}
	<-c.exited
}

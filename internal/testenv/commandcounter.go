package testenv

import (
	"bufio"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// CommandCounter is a unix socket in front of HAProxy's runtime socket that
// passes every byte on and counts the commands a client sends: what
// HAProxy is really asked, whichever code path asked it.
type CommandCounter struct {
	Socket string
	mu     sync.Mutex
	sent   []string
}

// StartCommandCounter listens on a socket of its own (Socket) in front of
// upstream, until the test ends.
func StartCommandCounter(t testing.TB, upstream string) *CommandCounter {
	t.Helper()
	c := &CommandCounter{Socket: filepath.Join(t.TempDir(), "counted.sock")}
	ln, err := net.Listen("unix", c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			go c.relay(down, upstream)
		}
	}()
	return c
}

// relay passes one connection on, reading the client's side line by line.
func (c *CommandCounter) relay(down net.Conn, upstream string) {
	defer down.Close()
	up, err := net.Dial("unix", upstream)
	if err != nil {
		return
	}
	defer up.Close()
	go func() {
		_, _ = io.Copy(down, up)
		down.Close() // HAProxy closed: so does the client's side
	}()
	r := bufio.NewReader(down)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			c.mu.Lock()
			c.sent = append(c.sent, strings.TrimSpace(strings.TrimPrefix(line, "@1 ")))
			c.mu.Unlock()
			if _, werr := io.WriteString(up, line); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Count returns how many commands sent so far start with prefix.
func (c *CommandCounter) Count(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.sent {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// Lines returns every command line sent so far, as sent (the master CLI's
// @1 prefix taken off, an @!<pid> one kept).
func (c *CommandCounter) Lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sent...)
}

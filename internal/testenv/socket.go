package testenv

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// RuntimeCommand sends one command to an HAProxy runtime socket in its
// non-interactive mode and returns the reply: everything until HAProxy
// closes the connection. Dial, write and read share a 5 s deadline.
func RuntimeCommand(socket, cmd string) (string, error) {
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	out, err := io.ReadAll(c)
	if err != nil {
		return string(out), fmt.Errorf("%s on %s: %w", cmd, socket, err)
	}
	return string(out), nil
}

// Command is RuntimeCommand, failing the test when the socket does not
// answer.
func Command(t testing.TB, socket, cmd string) string {
	t.Helper()
	out, err := RuntimeCommand(socket, cmd)
	if err != nil {
		t.Fatalf("runtime socket: %v", err)
	}
	return out
}

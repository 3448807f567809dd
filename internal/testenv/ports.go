package testenv

import (
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/internal/freeport"
)

// FreePort returns a TCP port that was free on every address a moment ago,
// below the kernel's ephemeral range and not given before in this process
// (freeport.Get). The port is released before returning, so another process
// could take it; tests use it at once.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.Get()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return port
}

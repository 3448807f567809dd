package testenv

import (
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/internal/freeport"
)

// FreePort returns a TCP port that was free on every address a moment ago,
// below the kernel's ephemeral range, not given before in this process and
// reserved for a minute against other processes' (freeport.Get). The port is
// released before returning, so a program that does not ask freeport could
// still take it; tests bind it at once.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.Get()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return port
}

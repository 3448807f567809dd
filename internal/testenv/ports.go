package testenv

import (
	"net"
	"testing"
)

// FreePort returns a TCP port that was free on every address a moment ago. The port is
// released before returning, so another process could take it; tests use it at once.
func FreePort(t testing.TB) int {
	t.Helper()
	// The wildcard (both families where the host has them): a port free
	// there is free on every address, so a test may bind it on 0.0.0.0 or
	// [::] too. A port free on 127.0.0.1 alone may be another address's
	// ephemeral port (a client bound to 127.1.2.3), and a wildcard bind of
	// it fails.
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

package testenv

import (
	"net"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. The port is
// released before returning, so another process could take it; tests use it at once.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

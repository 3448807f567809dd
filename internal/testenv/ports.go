package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"testing"
)

// FreePort returns a TCP port that was free on every address a moment ago. The port is
// released before returning, so another process could take it; tests use it at once.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return port
}

// freePort draws a port below the kernel's ephemeral range, free on the
// wildcard. Below the range: the kernel never hands such a port to an
// outgoing connection, so the port cannot be taken between this check and
// the test's bind by any connection of this suite or of a bench beside it
// (a test's HAProxy once failed to bind a port that another HAProxy's
// connection to its server took as its source port). On the wildcard (both
// families where the host has them): a port free there is free on every
// address, so a test may bind it on 0.0.0.0 or [::] too.
func freePort() (int, error) {
	low := ephemeralLow()
	lo, hi := max(low-20000, 1024), low // [lo, hi)
	if hi-lo < 1000 {
		lo, hi = 1024, 65536 // an odd range setting: anywhere
	}
	var last error
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			last = err
			continue
		}
		_ = l.Close()
		return port, nil
	}
	// Everything drawn was taken: let the kernel choose (an ephemeral port).
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("no port free (last drawn: %v): %w", last, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768,
// Linux's default, when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var low, high int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &low, &high); err != nil || low < 1024 || low > 65535 {
		return 32768
	}
	return low
}

// Package freeport hands out TCP ports for the tests' and benches' own
// servers (HAProxy listeners, sinks, Prometheus): free a moment ago, never
// one an outgoing connection could take, and never the same one twice in a
// process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
)

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Get returns a TCP port below the kernel's ephemeral range that was free
// on the wildcard a moment ago and that this process has not been given
// before. The port is released before returning: the caller binds it at
// once.
//
// Below the range: the kernel never hands such a port to an outgoing
// connection, so no connection of a test or of a bench beside it can take
// the port between this check and the bind (a test's HAProxy once failed
// to bind a port that another HAProxy's connection to its server took as
// its source port). On the wildcard (both families where the host has
// them): a port free there is free on every address, so a caller may bind
// it on 0.0.0.0 or [::] too. Never twice: a port checked free and released
// is free again until its caller binds it, so two callers asking before
// either binds were given the same port (a bench's HAProxy bound two
// servers' listeners on one port, and one server got no connection).
func Get() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	low := ephemeralLow()
	lo, hi := max(low-20000, 1024), low // [lo, hi)
	if hi-lo < 1000 {
		lo, hi = 1024, 65536 // an odd range setting: anywhere
	}
	var last error
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		if given[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			last = err
			continue
		}
		_ = l.Close()
		given[port] = true
		return port, nil
	}
	// Everything drawn was taken: let the kernel choose (an ephemeral
	// port), still not one given before.
	for range 20 {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return 0, fmt.Errorf("no port free (last drawn: %v): %w", last, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !given[port] {
			given[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port free that was not given before (last drawn: %v)", last)
}

// Loopback is Get as a 127.0.0.1 address.
func Loopback() (string, error) {
	port, err := Get()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", port), nil
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

// Package freeport hands out TCP ports for the tests' and benches' own
// servers (HAProxy listeners, sinks, Prometheus): free a moment ago, never
// one an outgoing connection could take, never the same one twice in a
// process, and none another process was given within the last minute.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// reserveFor is how long a port handed out stays reserved against other
// processes: long enough for the caller to start what binds it (an HAProxy,
// a carbon-cache, a daemon) on a loaded machine.
const reserveFor = time.Minute

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
// servers' listeners on one port, and one server got no connection). Nor to
// two processes: go test runs packages in parallel processes, and a bench
// may run beside them; a port handed out is reserved for reserveFor
// (reserve), and no other process's Get hands it out meanwhile.
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
		release, ok := reserve(port)
		if !ok {
			continue // another process has it
		}
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			release()
			last = err
			continue
		}
		_ = l.Close()
		given[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("free port: 200 ports drawn in [%d, %d) were all taken (last: %v)", lo, hi, last)
}

// reserve holds an abstract unix socket named for port for reserveFor: while
// it is held, reserve of the same port fails in every process of the host's
// network namespace. Abstract: nothing on disk, released when the process
// exits. ok is false when another process holds the port; where abstract
// sockets cannot be made at all, the port is handed out unreserved.
func reserve(port int) (release func(), ok bool) {
	l, err := net.Listen("unix", reservation(port))
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, false
	case err != nil:
		return func() {}, true
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = l.Close() }) }
	time.AfterFunc(reserveFor, release)
	return release, true
}

// reservation is the abstract socket's name for port.
func reservation(port int) string {
	return fmt.Sprintf("@haproxy-weighter-freeport-%d", port)
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

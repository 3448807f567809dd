package haproxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// appConfig is a roundrobin backend be_app (s1 weight 1, s2 weight 20, s3 disabled,
// s4 weight 0) plus backends with algorithms that refuse runtime weights.
func appConfig(t testing.TB) string {
	port := func() int { return testenv.FreePort(t) }
	return testenv.HAProxyDefaults + fmt.Sprintf(`
backend be_app
  balance roundrobin
  server s1 127.0.0.1:%d weight 1
  server s2 127.0.0.1:%d weight 20
  server s3 127.0.0.1:%d disabled
  server s4 127.0.0.1:%d weight 0
backend be_static
  balance static-rr
  server s1 127.0.0.1:%d
backend be_map
  balance source
  hash-type map-based
  server s1 127.0.0.1:%d weight 3
backend be_consistent
  balance source
  hash-type consistent
  server s1 127.0.0.1:%d weight 3
`, port(), port(), port(), port(), port(), port(), port())
}

// bigConfig is one leastconn backend be_big of n servers of weight 10.
func bigConfig(n int) string {
	var b strings.Builder
	b.WriteString(testenv.HAProxyDefaults + "backend be_big\n  balance leastconn\n")
	for i := range n {
		// Nothing listens there; without health checks the servers count as up.
		fmt.Fprintf(&b, "  server s%d 127.0.0.1:%d weight 10\n", i, 20000+i)
	}
	return b.String()
}

func newClient(t testing.TB, socket string, opts ...Option) *Client {
	t.Helper()
	c, err := New(Config{Socket: socket, Timeout: duration.Duration(5 * time.Second)}, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// testCtx bounds one test's calls to HAProxy at 30 s.
func testCtx(t testing.TB) context.Context { return testenv.Context(t, 30*time.Second) }

// byName indexes servers read from a Backend.
func byName(t testing.TB, b *RuntimeBackend) map[string]weighter.ServerState {
	t.Helper()
	servers, err := b.Servers(testCtx(t))
	if err != nil {
		t.Fatalf("Servers: %v", err)
	}
	m := make(map[string]weighter.ServerState, len(servers))
	for _, s := range servers {
		m[s.Name] = s
	}
	return m
}

// raw sends one command and returns its reply, for setting up state by hand.
func raw(t testing.TB, c *Client, cmd string) string {
	t.Helper()
	replies, err := c.roundTrip(testCtx(t), []string{cmd})
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return replies[0]
}

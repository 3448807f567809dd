package testenv

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// TwoServers is a real HAProxy carrying live traffic: frontend fe at Front
// sends to backend be, balance leastconn, servers s1 and s2 at Servers. It
// is the smallest fleet whose servers' loads a test can make differ.
type TwoServers struct {
	*HAProxy
	Front   string    // the frontend's address, 127.0.0.1:port
	Servers [2]string // s1's and s2's addresses
}

// StartTwoServers starts TwoServers in front of servers (StartDiscardServer
// sinks, usually), serverOptions ending each server line ("weight 100",
// "maxconn 1 weight 100"). The frontend has option contstats, so that `show
// stat`'s byte counters move while connections last, not only when they
// close.
func StartTwoServers(t testing.TB, servers [2]string, serverOptions string) *TwoServers {
	t.Helper()
	front := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	h := StartHAProxy(t, HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind %s
  option contstats
  default_backend be
backend be
  balance leastconn
  server s1 %s %s
  server s2 %s %s
`, front, servers[0], serverOptions, servers[1], serverOptions))
	return &TwoServers{HAProxy: h, Front: front, Servers: servers}
}

// Client opens a connection through the frontend and writes n bytes every
// period until the test ends (WriteEvery). Its first byte is written at
// once and 50 ms pass before it returns, so that HAProxy has placed it
// when the next client connects: clients opened one after the other go to
// s1, then s2, and so on (leastconn), whatever the period.
func (b *TwoServers) Client(t testing.TB, n int, period time.Duration) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", b.Front, 5*time.Second)
	if err != nil {
		t.Fatalf("client through %s: %v", b.Front, err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte{0}); err != nil {
		t.Fatalf("client through %s: %v", b.Front, err)
	}
	time.Sleep(50 * time.Millisecond) // one at a time, so leastconn spreads them
	WriteEvery(t, c, n, period)
	return c
}

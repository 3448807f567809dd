package sockdiag

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// startReplyServer listens on host (127.0.0.1 or ::1), and on each
// connection writes reply bytes, then reads the connection to EOF: a server
// whose client→server and server→client bytes are both known.
func startReplyServer(t testing.TB, host string, reply int) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := c.Write(make([]byte, reply)); err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// startHAProxy runs a real HAProxy with frontend fe on a free port to
// backend be, whose servers are given; extraGlobal goes in a second global
// section (e.g. `user nobody`). It returns HAProxy and the frontend's address.
func startHAProxy(t testing.TB, extraGlobal string, servers map[string]netip.AddrPort) (*testenv.HAProxy, string) {
	t.Helper()
	fe := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := ""
	if extraGlobal != "" {
		cfg = "global\n" + extraGlobal + "\n"
	}
	cfg += testenv.HAProxyDefaults + fmt.Sprintf("frontend fe\n  bind %s\n  default_backend be\nbackend be\n  balance roundrobin\n", fe)
	for name, ap := range servers {
		cfg += fmt.Sprintf("  server %s %s\n", name, ap)
	}
	return testenv.StartHAProxy(t, cfg), fe
}

// pidOf returns HAProxy's pid as a Config.PIDs.
func pidOf(h *testenv.HAProxy) func(context.Context) ([]int, error) {
	return func(context.Context) ([]int, error) { return []int{h.PID()}, nil }
}

// dial connects to addr and writes n bytes.
func dial(t testing.TB, addr string, n int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	if n > 0 {
		_, err = c.Write(make([]byte, n))
		require.NoError(t, err)
	}
	return c
}

// waitRead reads until done accepts the reading, checking on the way that
// no server's counter goes back and that each rate is its counter's growth
// over the span. It fails the test after 15 s.
func waitRead(t *testing.T, r *Reader, servers map[string]netip.AddrPort, done func(TableReading) bool) TableReading {
	t.Helper()
	var prev TableReading
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := r.Read(testenv.Context(t, 10*time.Second), servers)
		require.NoError(t, err)
		if !prev.At.IsZero() {
			for name, s := range got.Servers {
				p, ok := prev.Servers[name]
				if !ok {
					continue
				}
				require.GreaterOrEqual(t, s.In, p.In, name)
				require.GreaterOrEqual(t, s.Out, p.Out, name)
				if !s.Reset {
					span := got.At.Sub(got.Since).Seconds()
					require.InDelta(t, float64(s.In-p.In), s.RateIn*span, 1e-6*float64(s.In+1), name)
				}
			}
		}
		if done(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reading never got there; last: %+v", got)
		}
		prev = got
		time.Sleep(5 * time.Millisecond)
	}
}

package sockdiag

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestFilterKeepsOnlyTheServersSockets runs the kernel-side filter on a real
// table: among this process's sockets (both ends of each connection, and
// connections to another listener), it keeps exactly the connections to the
// servers, however many addresses the program holds (the match of the last
// address runs through every op's jumps), for IPv4 and IPv6, with the same
// reading as an unfiltered dump. Past the program's size the read goes
// unfiltered.
func TestFilterKeepsOnlyTheServersSockets(t *testing.T) {
	for _, tc := range []struct {
		host    string
		filler  func(i int) netip.AddrPort
		fillers int
	}{
		{"127.0.0.1", func(i int) netip.AddrPort {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 80)
		}, 3000},
		{"::1", func(i int) netip.AddrPort {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte{0xfd, 15: byte(i), 14: byte(i >> 8)}), 80)
		}, 2000},
	} {
		t.Run(tc.host, func(t *testing.T) {
			srv := startReplyServer(t, tc.host, 10)
			other := startReplyServer(t, tc.host, 10)
			for range 3 {
				dial(t, srv.String(), 100)
				dial(t, other.String(), 100)
			}
			servers := map[string]netip.AddrPort{}
			for i := range tc.fillers {
				servers[fmt.Sprintf("f%d", i)] = tc.filler(i)
			}
			servers["zz"] = srv
			filtered := New(Config{})
			unfiltered := New(Config{Unfiltered: true})
			got := waitRead(t, filtered, servers, func(g TableReading) bool { return g.Servers["zz"].Open == 3 && connIn(g) == 300 })
			assert.True(t, got.Filtered)
			assert.Equal(t, 3, got.Dumped, "the kernel returned only the server connections")
			all, err := unfiltered.Read(testenv.Context(t, 10*time.Second), servers)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, all.Dumped, 12, "both ends of six connections")
			assert.Equal(t, got.Conns[0].Local, all.Conns[0].Local)
			assert.Len(t, all.Conns, 3)
		})
	}
}

// TestFilterLayout checks the program's jumps against the kernel's rules
// (inet_diag_bc_audit): yes and no multiples of 4, the yes path through
// every op, each no landing on an op or 4 past the end.
func TestFilterLayout(t *testing.T) {
	addrs := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("10.0.0.2:0")}
	b := filterFor(2, addrs)
	require.Len(t, b, 2*20)
	// D_COND 10.0.0.1:80: yes 16 (its JMP), no 20 (the next D_COND).
	assert.Equal(t, []byte{bcDCond, 16, 20, 0}, b[0:4])
	assert.Equal(t, []byte{2, 32}, b[4:6])
	assert.Equal(t, []byte{80, 0, 0, 0}, b[8:12])
	assert.Equal(t, []byte{10, 0, 0, 1}, b[12:16])
	// JMP to the end: 40-16 = 24.
	assert.Equal(t, []byte{bcJmp, 4, 24, 0}, b[16:20])
	// The last D_COND's no is 4 past the end; port 0 is any port (-1).
	assert.Equal(t, []byte{bcDCond, 16, 24, 0}, b[20:24])
	assert.Equal(t, []byte{0xff, 0xff, 0xff, 0xff}, b[28:32])
	assert.Equal(t, []byte{bcJmp, 4, 4, 0}, b[36:40])

	many := make([]netip.AddrPort, 3277)
	for i := range many {
		many[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), 80)
	}
	assert.NotNil(t, filterFor(2, many[:3276]))
	assert.Nil(t, filterFor(2, many), "too many for 16-bit jumps: unfiltered")
}

// TestFilterServersAndListenersInOneProgram: the servers' conditions (on
// the peer) and the listeners' (on the socket's own address; a wildcard
// one on its port alone, a shorter condition) in one program keep exactly
// HAProxy's connections to the servers and the connections accepted on the
// listeners, after 3,000 other server addresses: not the client ends of
// those connections, not the connections of a listener not given. The
// same reading as an unfiltered dump.
func TestFilterServersAndListenersInOneProgram(t *testing.T) {
	srv := startReplyServer(t, "127.0.0.1", 10)
	listen := func() (netip.AddrPort, string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
			}
		}()
		ap := netip.MustParseAddrPort(ln.Addr().String())
		return ap, ap.String()
	}
	wild, wildAddr := listen()
	exact, exactAddr := listen()
	_, otherAddr := listen()
	for range 2 {
		dial(t, wildAddr, 1)
	}
	for range 3 {
		dial(t, exactAddr, 1)
		dial(t, srv.String(), 100)
	}
	for range 4 {
		dial(t, otherAddr, 1)
	}
	servers := map[string]netip.AddrPort{"zz": srv}
	for i := range 3000 {
		servers[fmt.Sprintf("f%d", i)] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 80)
	}
	listeners := []netip.AddrPort{netip.AddrPortFrom(netip.IPv4Unspecified(), wild.Port()), exact}
	filtered := New(Config{Listeners: listeners})
	got := waitRead(t, filtered, servers, func(g TableReading) bool {
		return g.Servers["zz"].Open == 3 && connIn(g) == 300 && g.Clients.Open == 5
	})
	assert.True(t, got.Filtered)
	assert.Equal(t, 8, got.Dumped, "the kernel returned the server connections and the accepted ones only")
	assert.Equal(t, 5, got.Clients.Matched)
	require.Len(t, got.Clients.Clients, 1)
	assert.Equal(t, netip.MustParseAddr("127.0.0.1"), got.Clients.Clients[0].Addr)
	assert.Equal(t, 5, got.Clients.Clients[0].Conns)
	all, err := New(Config{Listeners: listeners, Unfiltered: true}).Read(testenv.Context(t, 10*time.Second), servers)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, all.Dumped, 24, "every end of 12 connections")
	assert.Equal(t, 5, all.Clients.Open)
	assert.Equal(t, 3, all.Servers["zz"].Open)
}

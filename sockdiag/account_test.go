package sockdiag

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	addrA = netip.MustParseAddrPort("10.0.0.1:8080")
	addrB = netip.MustParseAddrPort("10.0.0.2:8080")
	t0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// sock is one observed socket for the accounting tests.
type sock struct {
	cookie  uint64
	addr    netip.AddrPort
	in, out uint64
	inode   uint32 // 0: orphaned
	foreign bool
}

// apply commits one read of socks at t0+at seconds.
func apply(a *account, servers map[string]netip.AddrPort, how Ownership, at int, socks ...sock) TableReading {
	idx := indexServers(servers)
	d := a.begin(idx, how)
	for _, s := range socks {
		addr := idx.match(s.addr)
		if !addr.IsValid() {
			continue
		}
		d.matched++
		d.obs = append(d.obs, observed{addr: addr, remote: s.addr, local: netip.MustParseAddrPort("10.9.9.9:40000"),
			cookie: s.cookie, inode: s.inode, in: s.in, out: s.out, mine: !s.foreign})
	}
	return a.commit(d, t0.Add(time.Duration(at)*time.Second))
}

func TestAccountCountsGrowthNewAndClosed(t *testing.T) {
	a := newAccount()
	srv := map[string]netip.AddrPort{"s1": addrA}
	r := apply(a, srv, OwnerInode, 0, sock{cookie: 1, addr: addrA, in: 100, out: 10, inode: 11})
	assert.Equal(t, Server{Addr: addrA, Open: 1, Sessions: 1, Reset: true, Shared: 1}, r.Servers["s1"], "the first read is the base")
	assert.True(t, math.IsNaN(r.Conns[0].RateIn))

	// c1 grows by 50; c2 opened since the read before with 300.
	r = apply(a, srv, OwnerInode, 2, sock{cookie: 1, addr: addrA, in: 150, out: 10, inode: 11}, sock{cookie: 2, addr: addrA, in: 300, out: 5, inode: 12})
	s := r.Servers["s1"]
	assert.Equal(t, uint64(350), s.In)
	assert.Equal(t, uint64(5), s.Out)
	assert.InDelta(t, 175, s.RateIn, 1e-9)
	assert.InDelta(t, 1.5, s.Sessions, 1e-9, "one open across the span, one opened in it")
	// c2 has no rate yet: its part is told apart, for the weighter to
	// leave out of the load per connection.
	assert.Equal(t, 2, s.Open)
	assert.Equal(t, 1, s.Fresh)
	assert.InDelta(t, 150, s.FreshRateIn, 1e-9)
	assert.InDelta(t, 2.5, s.FreshRateOut, 1e-9)
	assert.InDelta(t, 0.5, s.FreshSessions, 1e-9)
	require.Len(t, r.Conns, 2)
	assert.InDelta(t, 25, r.Conns[0].RateIn, 1e-9)
	assert.True(t, math.IsNaN(r.Conns[1].RateIn), "opened since: no rate of its own yet")

	// c1 closed: an orphan with 20 more bytes (its last ones); c2 gone
	// from the table: keeps what it had.
	r = apply(a, srv, OwnerInode, 4, sock{cookie: 1, addr: addrA, in: 170, out: 10})
	s = r.Servers["s1"]
	assert.Equal(t, uint64(370), s.In)
	assert.Zero(t, s.Open)
	assert.InDelta(t, 1, s.Sessions, 1e-9, "two closed in the span, half each")
	assert.Empty(t, r.Conns)

	// An orphan never counted open (closed before HAProxy's sockets were
	// read) adds nothing.
	r = apply(a, srv, OwnerInode, 6, sock{cookie: 9, addr: addrA, in: 5000})
	assert.Equal(t, uint64(370), r.Servers["s1"].In)
}

func TestAccountAddressChangeRemovalAndReturnNeverGoBack(t *testing.T) {
	a := newAccount()
	r := apply(a, map[string]netip.AddrPort{"s1": addrA}, OwnerInode, 0, sock{cookie: 1, addr: addrA, in: 100, inode: 11})
	r = apply(a, map[string]netip.AddrPort{"s1": addrA}, OwnerInode, 2, sock{cookie: 1, addr: addrA, in: 400, inode: 11})
	require.Equal(t, uint64(300), r.Servers["s1"].In)

	// s1 moves to B, where a connection already carried 1,000 bytes over
	// an unknown span: the base of B, not a jump.
	r = apply(a, map[string]netip.AddrPort{"s1": addrB}, OwnerInode, 4,
		sock{cookie: 1, addr: addrA, in: 900, inode: 11}, sock{cookie: 2, addr: addrB, in: 1000, inode: 12})
	s := r.Servers["s1"]
	assert.Equal(t, uint64(300), s.In)
	assert.Equal(t, addrB, s.Addr)
	assert.True(t, s.Reset, "a new address: no rate over the span yet")
	assert.Equal(t, 1, s.Open, "the old address's connection is not s1's any more")

	r = apply(a, map[string]netip.AddrPort{"s1": addrB}, OwnerInode, 6, sock{cookie: 2, addr: addrB, in: 1010, inode: 12})
	assert.Equal(t, uint64(310), r.Servers["s1"].In)
	assert.False(t, r.Servers["s1"].Reset)

	// Removed, then back: it goes on from its count.
	r = apply(a, map[string]netip.AddrPort{"s2": addrA}, OwnerInode, 8, sock{cookie: 2, addr: addrB, in: 5000, inode: 12})
	assert.NotContains(t, r.Servers, "s1")
	r = apply(a, map[string]netip.AddrPort{"s1": addrB}, OwnerInode, 10, sock{cookie: 2, addr: addrB, in: 6000, inode: 12})
	assert.Equal(t, uint64(310), r.Servers["s1"].In, "the address was not read the read before: a base again")
	r = apply(a, map[string]netip.AddrPort{"s1": addrB}, OwnerInode, 12, sock{cookie: 2, addr: addrB, in: 6001, inode: 12})
	assert.Equal(t, uint64(311), r.Servers["s1"].In)
}

func TestAccountForeignConnections(t *testing.T) {
	a := newAccount()
	srv := map[string]netip.AddrPort{"s1": addrA}
	apply(a, srv, OwnerUID, 0, sock{cookie: 1, addr: addrA, in: 10, inode: 11})
	r := apply(a, srv, OwnerUID, 2, sock{cookie: 1, addr: addrA, in: 20, inode: 11}, sock{cookie: 2, addr: addrA, in: 1 << 30, inode: 12, foreign: true})
	assert.Equal(t, uint64(10), r.Servers["s1"].In)
	assert.Equal(t, 1, r.Foreign)
	assert.Equal(t, 1, r.Servers["s1"].Open)

	// Another process's connection that becomes HAProxy's (the pids changed)
	// is a base: its bytes span an unknown time.
	r = apply(a, srv, OwnerUID, 4, sock{cookie: 1, addr: addrA, in: 20, inode: 11}, sock{cookie: 2, addr: addrA, in: 1<<30 + 5, inode: 12})
	assert.Equal(t, uint64(10), r.Servers["s1"].In)
	r = apply(a, srv, OwnerUID, 6, sock{cookie: 2, addr: addrA, in: 1<<30 + 7, inode: 12}, sock{cookie: 3, addr: addrA, in: 40, inode: 13})
	assert.Equal(t, uint64(52), r.Servers["s1"].In)

	// A change of ownership: no connection first counted in it is new.
	r = apply(a, srv, OwnerAny, 8, sock{cookie: 4, addr: addrA, in: 7777, inode: 14})
	assert.Equal(t, uint64(52), r.Servers["s1"].In)
}

func TestAccountSharedAddressAndAnyPort(t *testing.T) {
	a := newAccount()
	any := netip.AddrPortFrom(addrA.Addr(), 0)
	srv := map[string]netip.AddrPort{"s1": addrB, "s2": addrB, "s3": any}
	apply(a, srv, OwnerInode, 0)
	r := apply(a, srv, OwnerInode, 2, sock{cookie: 1, addr: addrB, in: 100, inode: 11}, sock{cookie: 2, addr: netip.AddrPortFrom(addrA.Addr(), 443), in: 7, inode: 12})
	for _, name := range []string{"s1", "s2"} {
		assert.Equal(t, uint64(50), r.Servers[name].In, name)
		assert.Equal(t, 2, r.Servers[name].Shared, name)
		assert.Equal(t, 1, r.Servers[name].Open, name)
		assert.InDelta(t, 0.25, r.Servers[name].Sessions, 1e-9, name)
	}
	assert.Equal(t, uint64(7), r.Servers["s3"].In, "a server without a port takes any port of its address")
	assert.Equal(t, "s1", r.Conns[0].Server)
}

// TestAccountDumpSkipsAndRepeats: the kernel's dump is not a snapshot; a
// connection it skipped once and lists again adds its growth once, and one
// it listed twice in a read counts once.
func TestAccountDumpSkipsAndRepeats(t *testing.T) {
	a := newAccount()
	srv := map[string]netip.AddrPort{"s1": addrA}
	apply(a, srv, OwnerInode, 0, sock{cookie: 1, addr: addrA, in: 100, inode: 11})
	apply(a, srv, OwnerInode, 2, sock{cookie: 1, addr: addrA, in: 200, inode: 11})
	r := apply(a, srv, OwnerInode, 4) // skipped
	assert.Equal(t, uint64(100), r.Servers["s1"].In)
	r = apply(a, srv, OwnerInode, 6, sock{cookie: 1, addr: addrA, in: 260, inode: 11})
	assert.Equal(t, uint64(160), r.Servers["s1"].In, "back after a skip: its growth, not its whole bytes again")
	assert.True(t, math.IsNaN(r.Conns[0].RateIn), "no rate over a span it was not seen at both ends of")

	r = apply(a, srv, OwnerInode, 8, sock{cookie: 1, addr: addrA, in: 300, inode: 11}, sock{cookie: 1, addr: addrA, in: 300, inode: 11})
	assert.Equal(t, uint64(200), r.Servers["s1"].In)
	assert.Equal(t, 1, r.Servers["s1"].Open)
	assert.Len(t, r.Conns, 1)
}

package sockdiag

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestLiveClientsPerAddress reads the clients of a real HAProxy 2.6's
// frontend: connections from distinct loopback addresses (127.0.0.2 with
// one connection, .3 with two, .4 with three) that send known bytes between
// two reads. Each address is reported with its connections, no rate at the
// read that first sees them (NaN), then what it sent over the span (the
// Reader's clock is the test's, so the rate is exact). A client of another
// frontend (routing to another backend) on the same host is not reported.
// Both a wildcard IPv4 bind (`bind :P`, read as 0.0.0.0:P) and a dual-stack
// one (`bind [::]:P`, whose IPv4 clients are IPv4-mapped AF_INET6 sockets).
func TestLiveClientsPerAddress(t *testing.T) {
	for _, tc := range []struct{ name, bind, listener string }{
		{name: "ipv4 wildcard", bind: ":%d", listener: "0.0.0.0:%d"},
		{name: "dual-stack wildcard", bind: "[::]:%d", listener: "[::]:%d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := startReplyServer(t, "127.0.0.1", 0)
			other := startReplyServer(t, "127.0.0.1", 0)
			fePort, otherPort := testenv.FreePort(t), testenv.FreePort(t)
			cfg := testenv.HAProxyDefaults + fmt.Sprintf(`frontend fe
  bind `+tc.bind+`
  default_backend be
frontend fe2
  bind 127.0.0.1:%d
  default_backend be2
backend be
  server s1 %s
backend be2
  server s2 %s
`, fePort, otherPort, sink, other)
			h := testenv.StartHAProxy(t, cfg)
			clock := testenv.NewClock()
			listener := netip.MustParseAddrPort(fmt.Sprintf(tc.listener, fePort))
			r := New(Config{PIDs: pidOf(h), Now: clock.Now, Listeners: []netip.AddrPort{listener}})
			servers := map[string]netip.AddrPort{"s1": sink}
			watch := New(Config{Ownership: OwnerAny})
			watched := map[string]netip.AddrPort{"s1": sink, "s2": other}

			fe := fmt.Sprintf("127.0.0.1:%d", fePort)
			conns := map[string][]net.Conn{}
			for k := 2; k <= 4; k++ {
				src := fmt.Sprintf("127.0.0.%d", k)
				for range k - 1 {
					conns[src] = append(conns[src], testenv.DialFrom(t, src, fe, 1))
				}
			}
			testenv.DialFrom(t, "127.0.0.9", fmt.Sprintf("127.0.0.1:%d", otherPort), 1) // fe2's
			// Every byte reached the servers: HAProxy received it first.
			waitRead(t, watch, watched, func(g TableReading) bool {
				return g.Servers["s1"].Open == 6 && g.Servers["s2"].Open == 1 && connIn(g) == 7
			})

			first, err := r.Read(testenv.Context(t, 10*time.Second), servers)
			require.NoError(t, err)
			require.NotNil(t, first.Clients)
			got := first.Clients
			assert.Equal(t, 6, got.Open)
			assert.Zero(t, got.Foreign)
			assert.Equal(t, 3, got.Tracked)
			require.Len(t, got.Clients, 3, "fe2's client is not fe's")
			for i, c := range got.Clients {
				assert.Equal(t, netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 2)}), c.Addr)
				assert.Equal(t, i+1, c.Conns)
				assert.Equal(t, i+1, c.Fresh)
				assert.True(t, math.IsNaN(c.RateIn), "every connection new: no rate")
			}

			// Over 2 s (the test's clock), address .k sends k×1000 bytes
			// on each of its connections, and fe2's client a megabyte.
			want := map[string]float64{}
			var total uint64 = 7
			for src, cs := range conns {
				k := int(netip.MustParseAddr(src).As4()[3])
				for _, c := range cs {
					_, err := c.Write(make([]byte, k*1000))
					require.NoError(t, err)
					want[src] += float64(k*1000) / 2
					total += uint64(k * 1000)
				}
			}
			waitRead(t, watch, watched, func(g TableReading) bool { return connIn(g) == total })
			clock.Advance(2 * time.Second)
			second, err := r.Read(testenv.Context(t, 10*time.Second), servers)
			require.NoError(t, err)
			require.Len(t, second.Clients.Clients, 3)
			for _, c := range second.Clients.Clients {
				assert.Equal(t, want[c.Addr.String()], c.RateIn, c.Addr.String())
				assert.Zero(t, c.RateOut, "the sink replies nothing")
				assert.Zero(t, c.Fresh, c.Addr.String())
			}

			// The weighter's view: the direction weighed by, heaviest
			// first. Now .2 alone sends, 9000 bytes over 2 s.
			_, err = conns["127.0.0.2"][0].Write(make([]byte, 9000))
			require.NoError(t, err)
			waitRead(t, watch, watched, func(g TableReading) bool { return connIn(g) == total+9000 })
			lr := NewLocalReader(r, func([]weighter.ServerState) (map[string]netip.AddrPort, error) { return servers, nil }, weighter.BytesIn)
			clock.Advance(2 * time.Second)
			read, err := lr.ReadLocal(testenv.Context(t, 10*time.Second), testenv.Servers("s1"))
			require.NoError(t, err)
			assert.Equal(t, []weighter.Client{{Addr: "127.0.0.2", Rate: 4500, Conns: 1}, {Addr: "127.0.0.3", Rate: 0, Conns: 2},
				{Addr: "127.0.0.4", Rate: 0, Conns: 3}}, read.Clients)
		})
	}
}

// clientSocket is a client connection of the dump as the kernel lists it.
func clientSocket(addr string, cookie uint64, in, out uint64) *socket {
	return &socket{local: netip.MustParseAddrPort("127.0.0.1:2003"), remote: netip.AddrPortFrom(netip.MustParseAddr(addr), 40000),
		cookie: cookie, inode: uint32(cookie), received: in, acked: out + 1, state: stateEstablished, hasInfo: true}
}

// TestClientsBoundAndForgotten: past the bound, a new address is not
// tracked (not listed, counted as untracked); an address with no
// connection is remembered ForgetClientAfter, keeping its place, then
// forgotten, and a new one takes the place.
func TestClientsBoundAndForgotten(t *testing.T) {
	c := newClientAccount()
	c.limit = 3
	clock := testenv.NewClock()
	for i := range 5 {
		c.add(clientSocket(fmt.Sprintf("10.0.0.%d", i+1), uint64(i+1), 100, 0), true)
	}
	got := c.commit(clock.Now(), 5)
	assert.Equal(t, 5, got.Open)
	assert.Equal(t, 3, got.Tracked)
	assert.Equal(t, 2, got.Untracked)
	require.Len(t, got.Clients, 3)
	assert.Equal(t, "10.0.0.1", got.Clients[0].Addr.String())

	// The tracked ones go away; a new address still finds no place while
	// they are remembered.
	clock.Advance(ForgetClientAfter - time.Minute)
	c.add(clientSocket("10.0.0.9", 9, 100, 0), true)
	got = c.commit(clock.Now(), 1)
	assert.Equal(t, 3, got.Tracked)
	assert.Equal(t, 1, got.Untracked)
	assert.Empty(t, got.Clients)

	// One comes back in time: remembered, its place kept.
	clock.Advance(30 * time.Second)
	c.add(clientSocket("10.0.0.2", 12, 100, 0), true)
	got = c.commit(clock.Now(), 1)
	require.Len(t, got.Clients, 1)
	assert.Equal(t, 3, got.Tracked)

	// Past ForgetClientAfter without a connection, the two others are
	// forgotten: a new address takes a place.
	clock.Advance(2 * time.Minute)
	c.add(clientSocket("10.0.0.2", 12, 200, 0), true)
	c.add(clientSocket("10.0.0.9", 19, 100, 0), true)
	got = c.commit(clock.Now(), 2)
	assert.Equal(t, 2, got.Tracked)
	assert.Zero(t, got.Untracked)
	require.Len(t, got.Clients, 2)
	assert.Equal(t, "10.0.0.9", got.Clients[1].Addr.String())
	assert.Len(t, c.conns, 2, "the connections gone for retainReads reads are forgotten")
}

// TestClientRates: a connection seen at two reads adds its growth over
// the time between them; a new one has no rate and adds nothing (its
// client's rate is NaN when all its connections are new); one the dump
// skipped adds, when back, its growth over the time since it was last
// seen; the direction is the socket's: received from the client is In,
// acknowledged by it (less the SYN) Out.
func TestClientRates(t *testing.T) {
	c := newClientAccount()
	clock := testenv.NewClock()
	c.add(clientSocket("10.0.0.1", 1, 1000, 50), true)
	c.add(clientSocket("10.0.0.2", 2, 1000, 0), true)
	c.add(clientSocket("10.0.0.3", 3, 1000, 0), false) // another process's
	got := c.commit(clock.Now(), 3)
	assert.Equal(t, 1, got.Foreign)
	require.Len(t, got.Clients, 2)

	clock.Advance(2 * time.Second)
	c.add(clientSocket("10.0.0.1", 1, 5000, 250), true)
	c.add(clientSocket("10.0.0.1", 4, 9000, 0), true) // new: no rate yet
	c.add(clientSocket("10.0.0.5", 5, 9000, 0), true) // new address
	// 10.0.0.2's connection skipped by this dump
	got = c.commit(clock.Now(), 3)
	require.Len(t, got.Clients, 2)
	one := got.Clients[0]
	assert.Equal(t, Client{Addr: netip.MustParseAddr("10.0.0.1"), Conns: 2, Fresh: 1, RateIn: 2000, RateOut: 100}, one)
	assert.True(t, math.IsNaN(got.Clients[1].RateIn))

	clock.Advance(2 * time.Second)
	c.add(clientSocket("10.0.0.2", 2, 5000, 0), true) // back: 4000 over 4 s
	got = c.commit(clock.Now(), 1)
	require.Len(t, got.Clients, 1)
	assert.Equal(t, 1000.0, got.Clients[0].RateIn)
}

// TestClientsSortedByRate: the weighter's list is heaviest first in the
// direction weighed by, clients without a rate last.
func TestClientsSortedByRate(t *testing.T) {
	nan := math.NaN()
	r := &ClientReading{Clients: []Client{
		{Addr: netip.MustParseAddr("10.0.0.1"), Conns: 1, RateIn: 10, RateOut: 500},
		{Addr: netip.MustParseAddr("10.0.0.2"), Conns: 2, RateIn: nan, RateOut: nan},
		{Addr: netip.MustParseAddr("10.0.0.3"), Conns: 1, RateIn: 300, RateOut: 0},
		{Addr: netip.MustParseAddr("::1"), Conns: 1, RateIn: 20, RateOut: 20},
	}}
	addrs := func(cs []weighter.Client) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Addr)
		}
		return out
	}
	in := (&LocalReader{bytes: weighter.BytesIn}).clients(r)
	assert.Equal(t, []string{"10.0.0.3", "::1", "10.0.0.1", "10.0.0.2"}, addrs(in))
	assert.True(t, math.IsNaN(in[3].Rate))
	assert.Equal(t, 2, in[3].Conns)
	out := (&LocalReader{bytes: weighter.BytesOut}).clients(r)
	assert.Equal(t, []string{"10.0.0.1", "::1", "10.0.0.3", "10.0.0.2"}, addrs(out))
	both := (&LocalReader{bytes: weighter.BytesBoth}).clients(r)
	assert.Equal(t, 510.0, both[0].Rate)
}

// BenchmarkClientMemory reports what the Reader keeps per tracked client
// address at MaxClients addresses: the address (its place in the tracked
// set, remembered ForgetClientAfter after its last connection) and, while
// it has one, each open connection's record.
//
//	go test -run '^$' -bench BenchmarkClientMemory -benchtime 1x ./sockdiag/
func BenchmarkClientMemory(b *testing.B) {
	for b.Loop() {
		var before, withConns, alone runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := newClientAccount()
		for i := range MaxClients {
			c.add(clientSocket(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String(), uint64(i+1), 100, 0), true)
		}
		got := c.commit(time.Unix(1_800_000_000, 0), MaxClients)
		if got.Tracked != MaxClients || len(c.conns) != MaxClients {
			b.Fatalf("tracked %d addresses, %d connections", got.Tracked, len(c.conns))
		}
		got = nil
		c.obs, c.aggs, c.aggIdx = nil, nil, map[netip.Addr]int32{} // a read's, not kept
		runtime.GC()
		runtime.ReadMemStats(&withConns)
		c.conns = map[uint64]*clientConn{} // the connections gone (a map does not shrink)
		runtime.GC()
		runtime.ReadMemStats(&alone)
		b.ReportMetric(float64(alone.HeapAlloc-before.HeapAlloc)/MaxClients, "B/address")
		b.ReportMetric(float64(withConns.HeapAlloc-alone.HeapAlloc)/MaxClients, "B/connection")
		runtime.KeepAlive(c)
	}
}

// BenchmarkClientAccount measures the accounting alone of a client read
// (no dump): 10,000 connections from 2,000 addresses, each seen at the
// read before, as BenchmarkReadClients's reads are.
//
//	go test -run '^$' -bench BenchmarkClientAccount ./sockdiag/
func BenchmarkClientAccount(b *testing.B) {
	c := newClientAccount()
	socks := make([]*socket, 10_000)
	for i := range socks {
		socks[i] = clientSocket(netip.AddrFrom4([4]byte{127, 1, byte(i % 2000 / 250), byte(i%2000%250 + 1)}).String(), uint64(i+1), 100, 0)
	}
	at := time.Unix(1_800_000_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(2 * time.Second)
		for _, s := range socks {
			s.received += 10
			c.add(s, true)
		}
		if got := c.commit(at, len(socks)); len(got.Clients) != 2000 {
			b.Fatalf("%d clients", len(got.Clients))
		}
	}
}

package sockdiag

import (
	"cmp"
	"math"
	"net/netip"
	"slices"
	"time"
)

// HAProxy's client side: the connections HAProxy accepted on a backend's
// listeners (the bind addresses of the frontends that route to it), read in
// the same dump as the server side, filtered by the kernel on the local
// address and port (a wildcard bind on the port alone) in the same program. Per client
// address (no port): what it sends and receives over all its connections,
// and how many it holds. What pinning chooses its heavy clients from.
//
// Counting: a connection is told apart by its socket cookie. One seen at an
// earlier read (one of the last retainReads: a dump may skip a socket) adds
// its growth since then over the time since then; one first seen at this
// read has no rate (its bytes span an unknown part of the span: from its
// opening, or from before the first read) and adds nothing to its client's
// rate, it only counts among its connections (Fresh). A client whose every
// connection is new has no rate (NaN). A connection that closed between two
// reads is lost with what it carried since the read before (its socket
// leaves ESTABLISHED within a millisecond of its close; the closing states
// are not counted).

// MaxClients bounds the client addresses a Reader tracks: a backend behind
// a public frontend can see any number of addresses, and each costs the
// daemon memory. 100,000 is far above the clients a pin table (`stick-table
// … size`) usefully holds for one backend's heavy ones, and costs 5.2 MB
// (52 bytes an address, BenchmarkClientMemory), plus 88 bytes for each open
// connection of theirs. Past it, a new address is not tracked: its
// connections are not read until a tracked address is forgotten, and the
// reading counts it (ClientReading.Untracked).
const MaxClients = 100_000

// ForgetClientAfter is how long a tracked address with no connection is
// remembered: it keeps its place under MaxClients across a reconnection (a
// restart storm brings every client back within seconds) and leaves it once
// it has not come back for this long.
const ForgetClientAfter = 10 * time.Minute

// sweepEvery spaces the walks of the tracked addresses that forget the
// stale ones: a walk of 100,000 of them is a map iteration of 100,000
// entries, not worth making at every read.
const sweepEvery = time.Minute

// clientStates are the client connections counted (and asked for, in a
// dump of its own): open ones. Not the closing states (HAProxy closed it:
// the client's last bytes are in the reading before), not LISTEN (the
// listener itself), not SYN_RECV.
const clientStates = 1<<stateEstablished | 1<<stateCloseWait

// ClientReading is one read of HAProxy's client connections.
type ClientReading struct {
	// Clients are the tracked addresses with an open connection at the
	// read, sorted by address.
	Clients []Client
	// Open is how many of HAProxy's client connections to the listeners
	// were open (tracked addresses' and untracked ones').
	Open int
	// Tracked is how many addresses the Reader tracks (with a connection
	// at the read or within ForgetClientAfter); Untracked how many
	// addresses with a connection at the read were not tracked, the
	// tracked ones being MaxClients already.
	Tracked, Untracked int
	// Matched is how many sockets of the dump were on a listener's address
	// and port; Foreign how many of them were left out as not HAProxy's.
	Matched, Foreign int
}

// Client is one client address's connections at a read.
type Client struct {
	Addr netip.Addr // IPv4-mapped addresses as IPv4
	// Conns is its open connections; Fresh how many of them have no rate
	// yet (first seen at this read).
	Conns, Fresh int
	// RateIn is what HAProxy received from it (client → server, the
	// direction of Server.RateIn, bytes_received) and RateOut what HAProxy
	// sent it (server → client, bytes_acked less the SYN), bytes/s, summed
	// over its connections with a rate; NaN when Fresh == Conns.
	RateIn, RateOut float64
}

// clientObs is one client socket of a read, kept until the read commits.
type clientObs struct {
	addr    netip.Addr
	cookie  uint64
	inode   uint32
	in, out uint64
	mine    bool
}

// clientConn is what is remembered of one client connection: 56 bytes,
// 88 with its place in the map (BenchmarkClientMemory). A pointer in the
// map: a known connection is updated in place, one hash a socket.
type clientConn struct {
	addr    netip.Addr
	in, out uint64
	at      int64  // when last seen (unix ns)
	seen    uint64 // the number of the read that last saw it
}

// clientAgg is one address's part of a read.
type clientAgg struct {
	addr            netip.Addr
	conns, fresh    int
	rateIn, rateOut float64
	untracked       bool
}

// clientAccount counts the client connections across reads. The Reader
// serialises calls.
type clientAccount struct {
	limit  int
	forget time.Duration
	reads  uint64
	conns  map[uint64]*clientConn
	// addrs are the tracked addresses, each with the last read (unix ns)
	// that saw a connection of it: 52 bytes each (BenchmarkClientMemory).
	addrs     map[netip.Addr]int64
	lastSweep time.Time
	// A read's observations, and its addresses (aggs, aggIdx: where each
	// is in aggs), reused between reads.
	obs    []clientObs
	aggs   []clientAgg
	aggIdx map[netip.Addr]int32
}

func newClientAccount() *clientAccount {
	return &clientAccount{limit: MaxClients, forget: ForgetClientAfter, conns: map[uint64]*clientConn{},
		addrs: map[netip.Addr]int64{}, aggIdx: map[netip.Addr]int32{}}
}

// add records one socket of the client dump.
func (c *clientAccount) add(s *socket, mine bool) {
	c.obs = append(c.obs, clientObs{addr: s.remote.Addr().Unmap(), cookie: s.cookie, inode: s.inode,
		in: s.received, out: s.dataOut(), mine: mine})
}

// settle applies the ownership a second descriptor listing decided.
func (c *clientAccount) settle(got map[uint32]bool) {
	for i := range c.obs {
		if v, ok := got[c.obs[i].inode]; ok {
			c.obs[i].mine = v
		}
	}
}

// discard drops the observations of a read that failed.
func (c *clientAccount) discard() { c.obs = c.obs[:0] }

// commit counts the observations of a read made at `at`.
func (c *clientAccount) commit(at time.Time, matched int) *ClientReading {
	n := c.reads + 1
	now := at.UnixNano()
	out := &ClientReading{Matched: matched}
	if at.Sub(c.lastSweep) >= sweepEvery {
		// First: a place freed now goes to a new address of this read.
		c.sweep(now)
		c.lastSweep = at
	}
	clear(c.aggIdx)
	c.aggs = c.aggs[:0]
	for i := range c.obs {
		o := &c.obs[i]
		rec := c.conns[o.cookie]
		if rec != nil && rec.seen == n {
			continue // listed twice by one dump
		}
		if !o.mine {
			out.Foreign++
			continue
		}
		out.Open++
		k, met := c.aggIdx[o.addr]
		if !met {
			k = int32(len(c.aggs))
			c.aggIdx[o.addr] = k
			a := clientAgg{addr: o.addr}
			if _, tracked := c.addrs[o.addr]; !tracked && len(c.addrs) >= c.limit {
				a.untracked = true
				out.Untracked++
			} else {
				c.addrs[o.addr] = now
			}
			c.aggs = append(c.aggs, a)
		}
		a := &c.aggs[k]
		if a.untracked {
			continue
		}
		a.conns++
		if rec != nil && rec.addr == o.addr && now > rec.at {
			span := float64(now-rec.at) / float64(time.Second)
			a.rateIn += float64(grow(o.in, rec.in)) / span
			a.rateOut += float64(grow(o.out, rec.out)) / span
		} else {
			a.fresh++
		}
		if rec == nil {
			rec = &clientConn{}
			c.conns[o.cookie] = rec
		}
		*rec = clientConn{addr: o.addr, in: o.in, out: o.out, at: now, seen: n}
	}
	c.obs = c.obs[:0]
	for cookie, rec := range c.conns {
		if rec.seen+retainReads <= n {
			delete(c.conns, cookie)
		}
	}
	out.Clients = make([]Client, 0, len(c.aggs))
	for _, a := range c.aggs {
		if a.untracked {
			continue
		}
		cl := Client{Addr: a.addr, Conns: a.conns, Fresh: a.fresh, RateIn: a.rateIn, RateOut: a.rateOut}
		if a.fresh == a.conns {
			cl.RateIn, cl.RateOut = math.NaN(), math.NaN()
		}
		out.Clients = append(out.Clients, cl)
	}
	slices.SortFunc(out.Clients, func(x, y Client) int { return x.Addr.Compare(y.Addr) })
	out.Tracked = len(c.addrs)
	c.reads = n
	return out
}

// sweep forgets the addresses without a connection for c.forget.
func (c *clientAccount) sweep(now int64) {
	for addr, last := range c.addrs {
		if time.Duration(now-last) >= c.forget {
			delete(c.addrs, addr)
		}
	}
}

// sortClients sorts clients by rate, heaviest first, those without a rate
// (NaN) last, then by address.
func sortClients(s []Client, rate func(Client) float64) {
	slices.SortFunc(s, func(x, y Client) int {
		rx, ry := rate(x), rate(y)
		nx, ny := math.IsNaN(rx), math.IsNaN(ry)
		switch {
		case nx != ny:
			if nx {
				return 1
			}
			return -1
		case !nx && rx != ry:
			return cmp.Compare(ry, rx)
		}
		return x.Addr.Compare(y.Addr)
	})
}

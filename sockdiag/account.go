package sockdiag

import (
	"math"
	"net/netip"
	"time"
)

// How the servers' counters are built from reads of the socket table.
//
// A server's counter is the sum, over HAProxy's connections to its address,
// of what each carried while the Reader watched it. Connections are told
// apart by the kernel's socket cookie, unique for good (an inode, a 4-tuple
// can be reused):
//   - a connection seen at the read before and now adds its growth;
//   - a connection first seen now, to an address the read before also read,
//     opened in between: it adds all its bytes (they were all carried since
//     the read before), as `show sess all`'s reader counts a new stream's
//     totals from 0;
//   - a connection first seen at the first read, or at the first read of its
//     address (a new server, a changed address), or that was another
//     process's before (the pids or the ownership changed) adds nothing
//     now: its bytes span an unknown time. It is the base;
//   - a connection HAProxy closed stays in the table a while as an orphan
//     (no inode, FIN_WAIT, CLOSING, LAST_ACK) with its final counters: one
//     the Reader counted adds its last bytes. One gone from the table
//     (TIME_WAIT, or closed for good) keeps what was counted of it.
//
// A dump is not a snapshot: the kernel sends it in parts and resumes its walk
// of the socket hash by position, so sockets that close meanwhile can make it
// skip others, or list one twice. A connection is listed at most once a read
// (by cookie), and one missing from a read is remembered for retainReads
// reads: back, it adds its growth since it was last counted, not its whole
// bytes again.
//
// So what is lost: the bytes of connections that opened and closed between
// two reads and were gone by the second (short HTTP connections), and the
// last bytes of a connection that left the table without an orphan stage
// (reset). The product's clients hold their connections for many reads.
// Each counter is added to only, so it never goes back.

// retainReads is how many reads a connection missing from the table is
// remembered for.
const retainReads = 3

// observed is one socket of a read to a server's address, kept until the
// read is committed: a read that fails changes nothing.
type observed struct {
	addr          netip.AddrPort // the server address it matched
	local, remote netip.AddrPort
	cookie        uint64
	inode         uint32
	in, out       uint64
	mine          bool
}

// pending is one read in progress.
type pending struct {
	idx             serverIndex
	how             Ownership
	dumped, matched int
	obs             []observed
}

func (d *pending) add(s *socket, addr netip.AddrPort, mine bool) {
	d.matched++
	d.obs = append(d.obs, observed{addr: addr, local: unmap(s.local), remote: unmap(s.remote), cookie: s.cookie,
		inode: s.inode, in: s.dataOut(), out: s.received, mine: mine})
}

// connRec is what is remembered of one connection.
type connRec struct {
	addr    netip.AddrPort
	in, out uint64 // its totals as counted
	mine    bool   // HAProxy's at its last sight
	open    bool   // open (not orphaned) at its last sight
	seen    uint64 // the number of the last read that saw it
}

// serverRec is one server's accumulated counters.
type serverRec struct {
	addr     netip.AddrPort
	in, out  uint64
	reported bool
}

// addrSpan is what one read adds for a server address.
type addrSpan struct {
	in, out  uint64
	open     int
	sessions float64 // connection-spans: 1 open across the span, ½ opened or closed in it
	// The part of them from connections open at the read that have no rate
	// yet (first seen at this read, or not seen at the read before): see
	// addToServers.
	fresh             int
	freshIn, freshOut uint64
	freshSessions     float64
}

// account accumulates reads. The Reader serialises calls.
type account struct {
	reads     uint64
	at        time.Time
	how       Ownership
	conns     map[uint64]*connRec
	servers   map[string]*serverRec
	prevAddrs map[netip.AddrPort]bool
	obs       []observed // reused between reads
}

func newAccount() *account {
	return &account{conns: map[uint64]*connRec{}, servers: map[string]*serverRec{}, prevAddrs: map[netip.AddrPort]bool{}}
}

// begin starts a read of idx with ownership how.
func (a *account) begin(idx serverIndex, how Ownership) *pending {
	return &pending{idx: idx, how: how, obs: a.obs[:0]}
}

// commit applies a read made at `at` and returns its reading.
func (a *account) commit(d *pending, at time.Time) TableReading {
	a.obs = d.obs
	n := a.reads + 1
	var span float64
	if a.reads > 0 && at.After(a.at) {
		span = at.Sub(a.at).Seconds()
	}
	out := TableReading{At: at, Dumped: d.dumped, Matched: d.matched, Conns: make([]Conn, 0, len(d.obs))}
	if a.reads > 0 {
		out.Since = a.at
	}
	// A change of ownership makes other connections HAProxy's: none of
	// them is known to be new.
	baseline := n == 1 || d.how != a.how
	spans := make(map[netip.AddrPort]*addrSpan, len(d.idx.names))
	for ap := range d.idx.names {
		spans[ap] = &addrSpan{}
	}
	for i := range d.obs {
		o := &d.obs[i]
		rec := a.conns[o.cookie]
		if rec != nil && rec.seen == n {
			continue // listed twice by one dump
		}
		if o.inode == 0 {
			a.orphan(rec, o, n, span, spans[o.addr])
			continue
		}
		if !o.mine {
			out.Foreign++
			a.remember(rec, o, n, false)
			continue
		}
		var dIn, dOut uint64
		// Known: counted before, and its address read the read before too
		// (else its growth spans the time its server was not read).
		known := rec != nil && rec.mine && rec.addr == o.addr && a.prevAddrs[o.addr]
		opened := rec == nil && !baseline && a.prevAddrs[o.addr]
		switch {
		case known:
			dIn, dOut = grow(o.in, rec.in), grow(o.out, rec.out)
		case opened:
			dIn, dOut = o.in, o.out
		}
		rated := known && rec.seen == n-1 && span > 0
		c := Conn{Server: d.idx.names[o.addr][0], Local: o.local, Remote: o.remote, Inode: o.inode, Cookie: o.cookie,
			In: o.in, Out: o.out, RateIn: math.NaN(), RateOut: math.NaN()}
		if rated {
			c.RateIn, c.RateOut = float64(dIn)/span, float64(dOut)/span
		}
		out.Conns = append(out.Conns, c)
		sp := spans[o.addr]
		sp.in += dIn
		sp.out += dOut
		sp.open++
		sess := 1.0
		if opened && span > 0 {
			sess = 0.5
		}
		sp.sessions += sess
		if !rated && span > 0 {
			sp.fresh++
			sp.freshIn += dIn
			sp.freshOut += dOut
			sp.freshSessions += sess
		}
		a.remember(rec, o, n, true)
	}
	a.forget(n, span, spans)
	a.addToServers(d.idx, spans, span, &out)
	sortConns(out.Conns)
	a.reads, a.at, a.how = n, at, d.how
	clear(a.prevAddrs)
	for ap := range d.idx.names {
		a.prevAddrs[ap] = true
	}
	return out
}

// orphan counts the last bytes of a connection HAProxy closed since the
// read before (its socket lingers without an inode), when it was counted.
func (a *account) orphan(rec *connRec, o *observed, n uint64, span float64, sp *addrSpan) {
	if rec == nil || !rec.mine || rec.addr != o.addr || sp == nil || !a.prevAddrs[o.addr] {
		return // never HAProxy's here, or closed before it was counted
	}
	sp.in += grow(o.in, rec.in)
	sp.out += grow(o.out, rec.out)
	if rec.open && rec.seen == n-1 && span > 0 {
		sp.sessions += 0.5 // closed within the span
	}
	rec.in, rec.out = max(rec.in, o.in), max(rec.out, o.out)
	rec.open, rec.seen = false, n
}

// remember records a connection's sight.
func (a *account) remember(rec *connRec, o *observed, n uint64, mine bool) {
	if rec == nil {
		rec = &connRec{}
		a.conns[o.cookie] = rec
	}
	if mine && rec.mine && rec.addr == o.addr {
		rec.in, rec.out = max(rec.in, o.in), max(rec.out, o.out)
	} else {
		rec.in, rec.out = o.in, o.out
	}
	rec.addr, rec.mine, rec.open, rec.seen = o.addr, mine, true, n
}

// forget drops the connections that several reads did not see: gone from
// the table. One open at the read before and not at this one closed within
// the span (or the dump skipped it: see retainReads).
func (a *account) forget(n uint64, span float64, spans map[netip.AddrPort]*addrSpan) {
	for cookie, rec := range a.conns {
		if rec.seen == n {
			continue
		}
		if sp := spans[rec.addr]; sp != nil && rec.mine && rec.open && rec.seen == n-1 && span > 0 {
			sp.sessions += 0.5
		}
		if rec.seen+retainReads <= n {
			delete(a.conns, cookie)
		}
	}
}

// addToServers adds each address's span to its servers and writes their
// entries of the reading. The part of the rates and Sessions that comes from
// connections without a rate yet is reported apart (FreshRateIn, …), for the
// weighter to leave out of the load per connection (weighter.CombineFast).
func (a *account) addToServers(idx serverIndex, spans map[netip.AddrPort]*addrSpan, span float64, out *TableReading) {
	out.Servers = make(map[string]Server, len(idx.servers))
	for name, ap := range idx.servers {
		rec := a.servers[name]
		if rec == nil {
			rec = &serverRec{}
			a.servers[name] = rec
		}
		k := len(idx.names[ap])
		sp := spans[ap]
		dIn, dOut := sp.in/uint64(k), sp.out/uint64(k)
		rec.in += dIn
		rec.out += dOut
		s := Server{Addr: ap, In: rec.in, Out: rec.out, Open: sp.open, Shared: k, Fresh: sp.fresh,
			// A server's first read, or its address's: its rates do not
			// cover the span yet.
			Reset: !rec.reported || rec.addr != ap || !a.prevAddrs[ap]}
		if span > 0 {
			s.Sessions = sp.sessions / float64(k)
			s.FreshSessions = sp.freshSessions / float64(k)
			if !s.Reset {
				s.RateIn, s.RateOut = float64(dIn)/span, float64(dOut)/span
				s.FreshRateIn, s.FreshRateOut = float64(sp.freshIn/uint64(k))/span, float64(sp.freshOut/uint64(k))/span
			}
		} else {
			s.Sessions = float64(sp.open) / float64(k)
		}
		rec.addr, rec.reported = ap, true
		out.Servers[name] = s
	}
}

// grow is now-before, 0 if a counter went back (it does not for one socket).
func grow(now, before uint64) uint64 {
	if now < before {
		return 0
	}
	return now - before
}

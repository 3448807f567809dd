package sockdiag

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Config says whose sockets a Reader reads and how.
type Config struct {
	// PIDs returns HAProxy's processes: the worker, and after a reload the
	// old workers still serving their connections (the master CLI's `show
	// proc` lists them). Their descriptors (or uids) say which sockets are
	// HAProxy's. nil, or an empty list: every socket to a server counts
	// (OwnerAny).
	PIDs func(ctx context.Context) ([]int, error)
	// Ownership caps how precisely sockets are told apart ("" = the most
	// precise this process may: inode, else uid).
	Ownership Ownership
	// Unfiltered dumps every TCP socket and matches the servers here,
	// instead of having the kernel filter by peer address. Only to measure
	// what the filter saves.
	Unfiltered bool
	// NetNS, when > 0, is a file descriptor of the network namespace to
	// read (e.g. /proc/<HAProxy's pid>/ns/net opened by a daemon outside
	// it; needs CAP_SYS_ADMIN). 0 reads this process's own namespace.
	NetNS int
	// ProcRoot is where /proc is ("" = "/proc").
	ProcRoot string
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	// Listeners are HAProxy's listening addresses whose accepted
	// connections are the backend's clients (the binds of the frontends
	// that route to it alone); an unspecified address (0.0.0.0, ::) is a
	// wildcard bind, matched on its port. None: the clients are not read
	// (TableReading.Clients is nil) and no dump is made for them.
	Listeners []netip.AddrPort
}

// TableReading is one read of a backend's servers.
type TableReading struct {
	// At is when the table was read; Since the previous read's At (zero at
	// the first): the span the rates and Sessions cover.
	At, Since time.Time
	// Servers has an entry for each server asked for.
	Servers map[string]Server
	// Conns are HAProxy's connections to the servers open at the read,
	// sorted by server, then HAProxy's side of the connection.
	Conns []Conn
	// Owner says how HAProxy's sockets were told from others', OwnerWhy
	// why not more precisely ("" for inode).
	Owner    Ownership
	OwnerWhy string
	// UIDs are HAProxy's processes' uids, sorted, when Owner is uid: every
	// process of one of them counts as HAProxy (with 0, every root process).
	UIDs []uint32
	// Matched is how many sockets of the table had a server's address as
	// peer (HAProxy's and others', closing ones included); Foreign how many
	// of them were left out as not HAProxy's; Dumped how many sockets the
	// kernel returned (Matched when filtered, every TCP socket when not;
	// with listeners, their client sockets too: Clients.Matched).
	Matched, Foreign, Dumped int
	// Filtered: the kernel filtered the dump by the servers' addresses.
	Filtered bool
	// Took is how long the dump and its accounting took.
	Took time.Duration
	// Scans is how many times HAProxy's descriptors were listed (inode
	// ownership lists them only when new connections appeared).
	Scans int
	// Clients are HAProxy's client connections on Config.Listeners, by
	// client address; nil without listeners.
	Clients *ClientReading
}

// Server is one server's signal. In and Out are cumulative over the
// Reader's life: they never go back (across connections closing, address
// changes, removal and return of the server), start at an arbitrary base
// (0 at the server's first read; what its connections had carried before
// is not counted), so only their differences mean anything.
type Server struct {
	Addr netip.AddrPort
	// In is the data HAProxy delivered to the server (client → server: the
	// clients' requests and uploads; each socket's bytes_acked less the SYN
	// and FIN), Out the data the server sent HAProxy (server → client: the
	// replies; bytes_received). In is `show sess all`'s req total and
	// `show stat`'s bin, the product's default load.
	In, Out uint64
	// RateIn and RateOut are their growth over (Since, At], bytes/s; 0 when
	// Reset.
	RateIn, RateOut float64
	// Open is how many of HAProxy's connections to the server's address
	// were open at the read.
	Open int
	// Sessions is the mean number of open connections over (Since, At]: a
	// connection open at both reads counts for the whole span, one opened
	// or closed within it for half. At the first read, Open.
	Sessions float64
	// Fresh is how many of the Open connections have no rate of their own
	// yet (first seen at this read, or not seen at the read before);
	// FreshRateIn, FreshRateOut and FreshSessions are their part of RateIn,
	// RateOut and Sessions. A new connection has carried only what it
	// carried since it opened, maybe milliseconds before the read, maybe
	// its handshake alone: counted in the load per connection, it pulls it
	// down as if the server were idler (weighter.CombineFast leaves it out
	// while the server has connections with a rate).
	Fresh                     int
	FreshRateIn, FreshRateOut float64
	FreshSessions             float64
	// Reset: the first reading of this server through this Reader; its
	// rates mean nothing yet.
	Reset bool
	// Shared is how many servers of the backend have this address (1
	// alone). The kernel cannot tell their connections apart: each gets an
	// equal share of the bytes and Sessions; Open is the address's.
	Shared int
}

// Conn is one of HAProxy's connections to a server.
type Conn struct {
	Server string // the first name, by sort order, of a shared address
	// Local is HAProxy's side (source address and port), Remote the
	// server's: with them HAProxy's stream can be found.
	Local, Remote netip.AddrPort
	Inode         uint32
	Cookie        uint64 // the kernel's socket cookie
	// In and Out are the connection's own totals (as Server's).
	In, Out uint64
	// RateIn and RateOut are their growth since the previous read over its
	// span; NaN when the previous read did not see the connection.
	RateIn, RateOut float64
}

// Reader reads one backend's servers from the kernel's socket table and
// accumulates their counters across reads. Safe for concurrent use (reads
// are serialised).
type Reader struct {
	cfg  Config
	mu   sync.Mutex
	acc  *account
	cli  *clientAccount // nil without listeners
	ino  *inodeSet
	dial dialer
	// pidKey is the pid list the inode set was built for.
	pidKey string
	// invisible counts Check's reads in a row that found sessions and no
	// socket.
	invisible int
}

// New returns a Reader.
func New(cfg Config) *Reader {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Reader{cfg: cfg, acc: newAccount(), ino: newInodeSet(), dial: dialer{netNS: cfg.NetNS}}
	if len(cfg.Listeners) > 0 {
		r.cli = newClientAccount()
	}
	return r
}

// Read reads HAProxy's connections to servers (name → address; a port 0
// matches any port, as HAProxy then connects to the client's port) and
// returns each server's counters. An error changes nothing: the next read
// measures from the last good one.
func (r *Reader) Read(ctx context.Context, servers map[string]netip.AddrPort) (TableReading, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	began := r.cfg.Now()
	own, err := r.owner(ctx)
	if err != nil {
		return TableReading{}, err
	}
	idx := indexServers(servers)
	reqs := r.requests(idx)
	d := r.acc.begin(idx, own.how)
	var ownErr error
	unsure := false
	clientsMatched := 0
	err = r.dial.dump(ctx, reqs, func(req *dumpRequest, s *socket) {
		d.dumped++
		if ownErr != nil || !s.hasInfo {
			return
		}
		// A client first: its local port is a listener's, which no
		// connection HAProxy opens to a server has (the port is bound).
		var addr netip.AddrPort
		client := req.clients && r.listens(s)
		if !client {
			if addr = idx.match(unmap(s.remote)); !req.servers || !addr.IsValid() {
				return
			}
		}
		mine, sure, err := r.mine(ctx, own, s)
		if err != nil {
			ownErr = err
			return
		}
		unsure = unsure || !sure
		if client {
			clientsMatched++
			r.cli.add(s, mine)
			return
		}
		d.add(s, addr, mine)
	})
	if err == nil {
		err = ownErr
	}
	if err == nil && unsure {
		err = r.settle(ctx, own, d)
	}
	r.ino.endRead()
	if err != nil {
		if r.cli != nil {
			r.cli.discard()
		}
		return TableReading{}, fmt.Errorf("socket table: %w", err)
	}
	ended := r.cfg.Now()
	at := began.Add(ended.Sub(began) / 2)
	out := r.acc.commit(d, at)
	if r.cli != nil {
		out.Clients = r.cli.commit(at, clientsMatched)
	}
	out.Owner, out.OwnerWhy, out.Filtered = own.how, own.why, !r.cfg.Unfiltered
	if own.how == OwnerUID {
		out.UIDs = slices.Sorted(maps.Keys(own.uids))
	}
	out.Scans = r.ino.scans
	r.ino.scans = 0
	out.Took = r.cfg.Now().Sub(began)
	return out, nil
}

// owner resolves how this read tells HAProxy's sockets apart. The inode set
// is rebuilt when HAProxy's processes changed (a reload, a restart).
func (r *Reader) owner(ctx context.Context) (owner, error) {
	var pids []int
	if r.cfg.PIDs != nil {
		var err error
		pids, err = r.cfg.PIDs(ctx)
		if err != nil {
			return owner{}, fmt.Errorf("socket table: HAProxy's processes: %w", err)
		}
	}
	if err := r.sameNetNS(pids); err != nil {
		return owner{}, fmt.Errorf("socket table: %w", err)
	}
	own := resolveOwner(r.cfg.ProcRoot, pids, r.cfg.Ownership)
	key := fmt.Sprint(pids)
	if key != r.pidKey {
		r.ino, r.pidKey = newInodeSet(), key
	}
	return own, nil
}

// mine reports whether s is HAProxy's. A closing socket whose process
// closed it (an orphan: inode 0) has no owner left; it counts when the
// Reader counted it while it was open (its last bytes), see account.add.
// sure is false when the inode set cannot tell before the dump ends (a
// connection opened after the read listed HAProxy's descriptors): settle
// decides.
func (r *Reader) mine(ctx context.Context, own owner, s *socket) (mine, sure bool, err error) {
	if s.inode == 0 {
		return false, true, nil
	}
	switch own.how {
	case OwnerInode:
		return r.ino.owned(ctx, r.cfg.ProcRoot, own.pids, s.inode)
	case OwnerUID:
		return own.uids[s.uid], true, nil
	}
	return true, true, nil
}

// settle lists HAProxy's descriptors again after a dump that met sockets
// opened after the read's first listing (see inodeSet), and counts those
// that are HAProxy's as its own in this read already, so that a new
// connection's bytes count from its opening.
func (r *Reader) settle(ctx context.Context, own owner, d *pending) error {
	got, err := r.ino.settle(ctx, r.cfg.ProcRoot, own.pids)
	if err != nil {
		return err
	}
	for i := range d.obs {
		if v, ok := got[d.obs[i].inode]; ok {
			d.obs[i].mine = v
		}
	}
	if r.cli != nil {
		r.cli.settle(got)
	}
	return nil
}

// requests are the dumps of one read: one per address family the servers
// or the listeners use, filtered by the servers' addresses (the peer) and
// the listeners' (the local side) in one program, so that the kernel walks
// its socket table once for both (a walk of a table of 20,000 sockets costs
// 4-6 ms of CPU here, BenchmarkReadClients without listeners). A
// listener on :: accepts IPv4 clients too, as IPv4-mapped AF_INET6 sockets.
// Unfiltered when Config.Unfiltered, or the addresses do not fit one
// program.
func (r *Reader) requests(idx serverIndex) []dumpRequest {
	var lv4, lv6 []netip.AddrPort
	if r.cli != nil {
		lv4, lv6 = splitByFamily(r.cfg.Listeners)
	}
	var reqs []dumpRequest
	for _, fam := range []struct {
		family           uint8
		servers, listens []netip.AddrPort
	}{{unix.AF_INET, idx.v4, lv4}, {unix.AF_INET6, idx.v6, lv6}} {
		if len(fam.servers) == 0 && len(fam.listens) == 0 {
			continue
		}
		req := dumpRequest{family: fam.family, servers: len(fam.servers) > 0, clients: len(fam.listens) > 0, states: dumpStates}
		if !req.servers {
			req.states = clientStates
		}
		if !r.cfg.Unfiltered {
			req.bytecode = buildFilter(fam.family, fam.servers, fam.listens)
		}
		reqs = append(reqs, req)
	}
	return reqs
}

// listens reports whether a socket is a client connection accepted on one
// of the listeners: open, and its own address one of theirs (the filter's
// match, made again: the dump is shared with the servers', or unfiltered).
func (r *Reader) listens(s *socket) bool {
	if 1<<s.state&clientStates == 0 {
		return false
	}
	local := unmap(s.local)
	for _, l := range r.cfg.Listeners {
		if l.Port() != local.Port() {
			continue
		}
		la := l.Addr().Unmap()
		if la == local.Addr() || la.IsUnspecified() && (la.Is6() || local.Addr().Is4()) {
			return true
		}
	}
	return false
}

// serverIndex maps the servers' addresses to their names.
type serverIndex struct {
	servers map[string]netip.AddrPort
	names   map[netip.AddrPort][]string // sorted
	anyPort map[netip.Addr]bool         // addresses of servers without a port
	v4, v6  []netip.AddrPort
}

func indexServers(servers map[string]netip.AddrPort) serverIndex {
	idx := serverIndex{servers: make(map[string]netip.AddrPort, len(servers)), names: map[netip.AddrPort][]string{}, anyPort: map[netip.Addr]bool{}}
	addrs := make([]netip.AddrPort, 0, len(servers))
	for name, ap := range servers {
		if !ap.IsValid() {
			continue // a server without an address (yet) has no connection
		}
		ap = unmap(ap)
		idx.servers[name] = ap
		idx.names[ap] = append(idx.names[ap], name)
		if ap.Port() == 0 {
			idx.anyPort[ap.Addr()] = true
		}
		addrs = append(addrs, ap)
	}
	for _, n := range idx.names {
		slices.Sort(n)
	}
	idx.v4, idx.v6 = splitByFamily(addrs)
	return idx
}

// match returns the server address a peer belongs to, or the zero value.
func (idx serverIndex) match(peer netip.AddrPort) netip.AddrPort {
	if _, ok := idx.names[peer]; ok {
		return peer
	}
	if idx.anyPort[peer.Addr()] {
		return netip.AddrPortFrom(peer.Addr(), 0)
	}
	return netip.AddrPort{}
}

func sortConns(c []Conn) {
	slices.SortFunc(c, func(x, y Conn) int {
		return cmp.Or(cmp.Compare(x.Server, y.Server), x.Local.Compare(y.Local), cmp.Compare(x.Cookie, y.Cookie))
	})
}

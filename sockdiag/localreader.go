package sockdiag

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// LocalReader is a backend's fast signal for the weighter, read from the
// socket table: a weighter.LocalReader. Addrs turns the servers the cycle
// read (from `show servers state`) into the addresses to find connections
// to, as the target spells them; Bytes is the direction weighed by (weighter.BytesIn, the default,
// is what `show sess all`'s reader counts: client → server).
//
// Open sessions are not listed (LocalRead.Open stays nil): shedding needs
// HAProxy's stream id, which the caller finds from Last's connections (the
// server-side 4-tuple) only when a server is hot.
type LocalReader struct {
	reader *Reader
	addrs  Addrs
	bytes  weighter.Bytes
	now    func() time.Time

	mu       sync.Mutex
	last     TableReading
	reported map[string]bool
}

var _ weighter.LocalReader = (*LocalReader)(nil)

// Addrs returns the address of each of servers that has one, by name.
type Addrs func(servers []weighter.ServerState) (map[string]netip.AddrPort, error)

// NewLocalReader returns the weighter's reader over r.
func NewLocalReader(r *Reader, addrs Addrs, bytes weighter.Bytes) *LocalReader {
	return &LocalReader{reader: r, addrs: addrs, bytes: bytes, now: r.cfg.Now, reported: map[string]bool{}}
}

// ErrNoAddress: not one of the backend's servers has an address the socket
// table can show (every one a unix@ or abns@ socket, or not resolved yet).
// The table then says nothing about the backend, and a reader below it
// (`show sess all`, which names the server of each stream) can.
var ErrNoAddress = errors.New("no server has an IP address the socket table can show (unix@ or abns@ servers, or addresses not resolved yet)")

// Why a server is unread (weighter.LocalCounter.Unread).
const (
	// unreadNoAddress: HAProxy reaches it by no IP address and port the
	// table has (`show servers state` shows "-" for a unix@ or abns@
	// server, 0.0.0.0 for one not resolved yet).
	unreadNoAddress = "no IP address the socket table can show (a unix@ or abns@ server, or one not resolved yet)"
	// unreadFresh: its every connection is new since the read before and
	// carried nothing yet.
	unreadFresh = "its connections are new and carried no byte yet: no rate"
)

// ReadLocal reads the servers' counters. Each server gets an entry. One the
// table cannot show (no address), or whose HAProxy sessions (scur, read
// with the servers) the table showed none of, is Unread: its 0 B/s would
// read as an idle server, and an idle server is raised while it carries
// connections no one measured. Not one with an address: ErrNoAddress.
func (l *LocalReader) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	addrs, err := l.addrs(servers)
	if err != nil {
		return weighter.LocalRead{}, fmt.Errorf("socket table: the servers' addresses: %w", err)
	}
	if len(servers) > 0 && !slices.ContainsFunc(servers, func(s weighter.ServerState) bool { return addrs[s.Name].IsValid() }) {
		return weighter.LocalRead{}, fmt.Errorf("socket table: %w", ErrNoAddress)
	}
	got, err := l.reader.Read(ctx, addrs)
	if err != nil {
		return weighter.LocalRead{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = got
	out := weighter.LocalRead{At: got.At, Since: got.Since, Servers: make(map[string]weighter.LocalCounter, len(got.Servers)),
		Age: max(l.now().Sub(got.At), 0)}
	for name, s := range got.Servers {
		out.Servers[name] = l.counter(s)
	}
	if got.Clients != nil {
		out.Clients = l.clients(got.Clients)
	}
	for _, s := range servers {
		c, ok := out.Servers[s.Name]
		switch {
		case !ok:
			c.Unread = unreadNoAddress
		case s.Sessions > 0 && got.Servers[s.Name].Open == 0 && c.Sessions == 0:
			// HAProxy's sessions are not in the table: connections it
			// cannot attribute (from an address HAProxy no longer shows,
			// another namespace, sockets not told as HAProxy's), or ones
			// that opened and closed between the two reads, whose bytes the
			// reader loses (account.go). Either way not a measure of 0.
			c.Unread = fmt.Sprintf("HAProxy reports %d sessions on it and the socket table showed none of its connections", s.Sessions)
		case got.Servers[s.Name].Open > 0 && got.Servers[s.Name].Fresh == got.Servers[s.Name].Open && c.Rate == 0:
			c.Unread = unreadFresh
		}
		out.Servers[s.Name] = c
	}
	for name, c := range out.Servers {
		c.Reset = c.Reset || !l.reported[name]
		if c.Reset {
			c.Rate, c.FreshRate = 0, 0
		}
		out.Servers[name] = c
		l.reported[name] = true
	}
	return out, nil
}

// counter is one server's counter in the direction weighed by.
func (l *LocalReader) counter(s Server) weighter.LocalCounter {
	c := weighter.LocalCounter{Sessions: s.Sessions, Reset: s.Reset, FreshSessions: s.FreshSessions}
	switch l.bytes {
	case weighter.BytesOut:
		c.Bytes, c.Rate, c.FreshRate = float64(s.Out), s.RateOut, s.FreshRateOut
	case weighter.BytesBoth:
		c.Bytes, c.Rate, c.FreshRate = float64(s.In+s.Out), s.RateIn+s.RateOut, s.FreshRateIn+s.FreshRateOut
	default:
		c.Bytes, c.Rate, c.FreshRate = float64(s.In), s.RateIn, s.FreshRateIn
	}
	return c
}

// clients are the read's client addresses with what each sends in the
// direction weighed by, heaviest first, those without a rate yet (every
// connection new: NaN) last.
func (l *LocalReader) clients(r *ClientReading) []weighter.Client {
	rate := func(c Client) float64 {
		switch l.bytes {
		case weighter.BytesOut:
			return c.RateOut
		case weighter.BytesBoth:
			return c.RateIn + c.RateOut
		}
		return c.RateIn
	}
	byRate := slices.Clone(r.Clients)
	sortClients(byRate, rate)
	out := make([]weighter.Client, len(byRate))
	for i, c := range byRate {
		out[i] = weighter.Client{Addr: c.Addr.String(), Rate: rate(c), Conns: c.Conns}
	}
	return out
}

// Last returns the newest reading (with its connections), for the
// caller that maps a hot server's connections to HAProxy's streams.
func (l *LocalReader) Last() TableReading {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

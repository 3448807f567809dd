package sockdiag

import (
	"context"
	"fmt"
	"net/netip"
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
	last     Reading
	reported map[string]bool
}

var _ weighter.LocalReader = (*LocalReader)(nil)

// Addrs returns the address of each of servers that has one, by name.
type Addrs func(servers []weighter.ServerState) (map[string]netip.AddrPort, error)

// NewLocalReader returns the weighter's reader over r.
func NewLocalReader(r *Reader, addrs Addrs, bytes weighter.Bytes) *LocalReader {
	return &LocalReader{reader: r, addrs: addrs, bytes: bytes, now: r.cfg.Now, reported: map[string]bool{}}
}

// ReadLocal reads the servers' counters. Each server gets an entry; one
// without an address has no connection (0 bytes).
func (l *LocalReader) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	addrs, err := l.addrs(servers)
	if err != nil {
		return weighter.LocalRead{}, fmt.Errorf("socket table: the servers' addresses: %w", err)
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
	for _, s := range servers {
		if _, ok := out.Servers[s.Name]; !ok {
			out.Servers[s.Name] = weighter.LocalCounter{}
		}
	}
	for name, c := range out.Servers {
		c.Reset = c.Reset || !l.reported[name]
		if c.Reset {
			c.Rate = 0
		}
		out.Servers[name] = c
		l.reported[name] = true
	}
	return out, nil
}

// counter is one server's counter in the direction weighed by.
func (l *LocalReader) counter(s Server) weighter.LocalCounter {
	c := weighter.LocalCounter{Sessions: s.Sessions, Reset: s.Reset}
	switch l.bytes {
	case weighter.BytesOut:
		c.Bytes, c.Rate = float64(s.Out), s.RateOut
	case weighter.BytesBoth:
		c.Bytes, c.Rate = float64(s.In+s.Out), s.RateIn+s.RateOut
	default:
		c.Bytes, c.Rate = float64(s.In), s.RateIn
	}
	return c
}

// Last returns the newest reading (with its connections), for the
// caller that maps a hot server's connections to HAProxy's streams.
func (l *LocalReader) Last() Reading {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

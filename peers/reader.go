package peers

import (
	"context"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Reader is a backend's fast reader with its peers' readings added: per
// server, their rates and sessions to its own, and their rates over its own
// read span to its byte counter (which then never goes back, whichever
// peers come and go).
type Reader struct {
	own     weighter.LocalReader
	backend string
	peers   *Set

	mu     sync.Mutex
	lastAt time.Time
	added  map[string]float64 // per server: the peers' bytes added so far
}

var _ weighter.LocalReader = (*Reader)(nil)

// NewReader adds the readings of set's peers to own's reads of backend, and
// publishes own's reads to them.
func NewReader(own weighter.LocalReader, backend string, set *Set) *Reader {
	return &Reader{own: own, backend: backend, peers: set, added: map[string]float64{}}
}

// ReadLocal reads the own signal, publishes it, and adds the peers'. The
// peers' readings are matched to servers by the addresses of the cycle's
// servers (match.go): a name does not name the same server on every
// balancer; a server without an address is matched by name.
func (r *Reader) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	cur, err := r.own.ReadLocal(ctx, servers)
	if err != nil {
		r.peers.noneAdded(r.backend)
		return cur, err
	}
	addrs := addressesOf(servers)
	r.peers.publish(r.backend, cur, addrs)
	got, note := r.peers.readings(r.backend, cur.Counts)
	matches := make([]match, len(got))
	for i, g := range got {
		matches[i] = matchPeer(g.servers, addrs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	span := 0.0
	if !cur.Since.IsZero() && cur.At.After(r.lastAt) {
		span = cur.At.Sub(cur.Since).Seconds()
		r.lastAt = cur.At
	}
	out := cur
	out.Peers = note
	out.Servers = make(map[string]weighter.LocalCounter, len(cur.Servers))
	for name, c := range cur.Servers {
		rate, sess := 0.0, 0.0
		for _, m := range matches {
			s := m.of(name, addrs[name])
			rate, sess = rate+s.BytesPerSecond, sess+s.Sessions
		}
		r.added[name] += rate * span
		c.Bytes += r.added[name]
		if !c.Reset {
			c.Rate += rate
			c.Sessions += sess
		}
		out.Servers[name] = c
	}
	return out, nil
}

// addressesOf maps each of servers that has an address to it, by name.
func addressesOf(servers []weighter.ServerState) map[string]string {
	out := make(map[string]string, len(servers))
	for _, s := range servers {
		if s.Address != "" {
			out[s.Name] = s.Address
		}
	}
	return out
}

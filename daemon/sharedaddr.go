package daemon

import (
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"

	"github.com/haproxy-weighter/haproxy-weighter/fastsignal"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// sharedAddresses finds a server address that two backends of one HAProxy
// share while both are weighed by the kernel's socket table. The table
// cannot tell which backend a connection to that address came through, so
// each backend counts all of HAProxy's connections to it: both read the
// server as carrying the sum. The daemon's configuration holds both
// backends, so it can say so, once, rather than leave it to a paragraph of
// the docs; `fast_signal: sessions` on either backend (or both) splits them.
type sharedAddresses struct {
	mu sync.Mutex
	// by is each backend's servers' addresses as its last cycle read them,
	// while the kernel reads its fast signal; keyed by backend name.
	by map[string]backendAddrs
	// said holds the shared addresses warned about, so that a warning is
	// said once while it holds.
	said map[sharedKey]bool
}

// sharedKey is one address two backends share, the backends in order.
type sharedKey struct {
	first, second string
	addr          netip.AddrPort
}

type backendAddrs struct {
	haproxy *haproxy.Client // one HAProxy: the units on one socket share their client
	addrs   map[netip.AddrPort][]string
}

func newSharedAddresses() *sharedAddresses {
	return &sharedAddresses{by: map[string]backendAddrs{}, said: map[sharedKey]bool{}}
}

// note records the cycle c of unit u and warns about each address it now
// shares with another backend of the same HAProxy that the kernel reads.
func (s *sharedAddresses) note(log *slog.Logger, u *managedBackend, c weighter.Cycle) {
	if s == nil || u.client == nil {
		return
	}
	name := u.Backend.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.Signal == nil || c.Signal.Reader != fastsignal.ReaderKernel || c.Servers == nil {
		if c.Signal != nil && c.Signal.Reader != "" { // another reader weighs it now: nothing shared
			delete(s.by, name)
		}
		return
	}
	mine := backendAddrs{haproxy: u.client, addrs: map[netip.AddrPort][]string{}}
	for server, ap := range haproxy.ServerAddrs(c.Servers) {
		mine.addrs[ap] = append(mine.addrs[ap], server)
	}
	s.by[name] = mine
	still := map[sharedKey]bool{}
	for _, other := range slices.Sorted(maps.Keys(s.by)) {
		theirs := s.by[other]
		if other == name || theirs.haproxy != u.client {
			continue
		}
		for ap, servers := range mine.addrs {
			for tap, tservers := range theirs.addrs {
				if !sameServerAddr(ap, tap) {
					continue
				}
				key := sharedKey{first: min(name, other), second: max(name, other), addr: ap}
				still[key] = true
				if s.said[key] {
					continue
				}
				s.said[key] = true
				// log carries the backend already.
				log.Warn("server address in two backends", "address", ap.String(), "servers", servers, "other_backend", other, "other_servers", tservers,
					"effect", "the kernel's socket table counts HAProxy's connections to it in both backends",
					"fix", "fast_signal: sessions on these backends")
			}
		}
	}
	for key := range s.said {
		if (key.first == name || key.second == name) && !still[key] {
			delete(s.said, key) // no longer shared: said again if it comes back
		}
	}
}

// retain forgets the backends a reload removed.
func (s *sharedAddresses) retain(units []*managedBackend) {
	if s == nil {
		return
	}
	keep := map[string]bool{}
	for _, u := range units {
		keep[u.Backend.Name] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.by {
		if !keep[name] {
			delete(s.by, name)
		}
	}
}

// sameServerAddr: one address, and one port or either port 0 (HAProxy then
// connects to the client's destination port, any port).
func sameServerAddr(a, b netip.AddrPort) bool {
	return a.Addr() == b.Addr() && (a.Port() == b.Port() || a.Port() == 0 || b.Port() == 0)
}

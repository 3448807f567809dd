package haproxy

import (
	"slices"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// KnownServers returns the servers the newest Servers call read (nil before
// the first): each cycle starts with one, so a source that matches its
// series to servers by address finds the addresses of the cycle without a
// round trip of its own.
func (b *Backend) KnownServers() []weighter.ServerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.known)
}

func (b *Backend) keepServers(servers []weighter.ServerState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.known = slices.Clone(servers)
}

package lvs

import (
	"fmt"
	"net/netip"
	"sort"
)

// serverAddr is one entry of the servers map: an exact ip:port, or an ip
// (port 0) that matches that address on any port.
type serverAddr struct {
	name string
	addr netip.Addr
	port uint16
}

// names resolves destinations to server names and back.
type names struct {
	entries []serverAddr // sorted by name, for deterministic errors
}

// parseServers validates the servers map.
func parseServers(m map[string]string) (names, error) {
	var n names
	seen := map[string]string{}
	for name, value := range m {
		if name == "" {
			return names{}, fmt.Errorf("ipvs: servers: empty server name for %q", value)
		}
		e, err := parseServerAddr(value)
		if err != nil {
			return names{}, fmt.Errorf("ipvs: servers: %s: %w", name, err)
		}
		e.name = name
		key := e.key()
		if other, dup := seen[key]; dup {
			a, b := sortedPair(name, other)
			return names{}, fmt.Errorf("ipvs: servers: %s and %s both map to %s", a, b, key)
		}
		seen[key] = name
		n.entries = append(n.entries, e)
	}
	sort.Slice(n.entries, func(i, j int) bool { return n.entries[i].name < n.entries[j].name })
	return n, nil
}

func parseServerAddr(s string) (serverAddr, error) {
	// The kernel reports destinations without a zone: an address with one
	// would validate and then never match.
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if z := ap.Addr().Zone(); z != "" {
			return serverAddr{}, fmt.Errorf("address %q has a zone (%%%s); IPVS addresses have none", s, z)
		}
		if ap.Port() == 0 {
			return serverAddr{}, fmt.Errorf("address %q has port 0", s)
		}
		return serverAddr{addr: ap.Addr().Unmap(), port: ap.Port()}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if z := a.Zone(); z != "" {
			return serverAddr{}, fmt.Errorf("address %q has a zone (%%%s); IPVS addresses have none", s, z)
		}
		return serverAddr{addr: a.Unmap()}, nil
	}
	return serverAddr{}, fmt.Errorf("address %q is not a literal ip or ip:port", s)
}

func (e serverAddr) key() string {
	if e.port == 0 {
		return e.addr.String()
	}
	return netip.AddrPortFrom(e.addr, e.port).String()
}

func sortedPair(a, b string) (string, string) {
	if a > b {
		return b, a
	}
	return a, b
}

// nameOf returns the server name of the destination at ap: the map entry with
// that exact ip:port, else the entry with that bare ip, else "ip:port".
func (n names) nameOf(ap netip.AddrPort) string {
	bare := ""
	for _, e := range n.entries {
		if e.addr != ap.Addr() {
			continue
		}
		if e.port == ap.Port() {
			return e.name
		}
		if e.port == 0 {
			bare = e.name
		}
	}
	if bare != "" {
		return bare
	}
	return ap.String()
}

package peers

// match finds a peer's reading of each own server: by address when the two
// balancers share any (a name does not name the same server on every
// balancer: server-template fills its slots in the order DNS answers), by
// name when they share none (balancers reaching the servers at other
// addresses, or a peer that does not say them).
type match struct {
	byName map[string]serverRead
	byAddr map[string]serverRead // nil: match by name
	// names counts the own servers at each address: the peer's reading of
	// the address is shared among them, so that it is added once in all.
	names map[string]int
}

// matchPeer matches the peer's servers to the own servers' addresses (own,
// by name).
func matchPeer(servers map[string]serverRead, own map[string]string) match {
	m := match{byName: servers, names: map[string]int{}}
	for _, a := range own {
		m.names[a]++
	}
	shared := false
	byAddr := map[string]serverRead{}
	for _, s := range servers {
		if s.Address == "" {
			continue
		}
		shared = shared || m.names[s.Address] > 0
		// One server under two names there: its readings summed.
		sum := byAddr[s.Address]
		byAddr[s.Address] = serverRead{BytesPerSecond: sum.BytesPerSecond + s.BytesPerSecond,
			Sessions: sum.Sessions + s.Sessions, Address: s.Address}
	}
	if shared {
		m.byAddr = byAddr
	}
	return m
}

// of is the peer's reading of the own server name at addr.
func (m match) of(name, addr string) serverRead {
	if m.byAddr != nil && addr != "" {
		s := m.byAddr[addr]
		if n := float64(m.names[addr]); n > 1 {
			s.BytesPerSecond, s.Sessions = s.BytesPerSecond/n, s.Sessions/n
		}
		return s
	}
	return m.byName[name]
}

// Package addrmatch matches a metrics source's series to HAProxy servers by
// address rather than by name (`match: address`).
package addrmatch

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Matching servers by address (`match: address`): with server-template or
// service discovery HAProxy names servers srv1..srvN, while the metrics name
// each by its host or address, often with the port of the exporter rather
// than the server's. A series name is matched to the server whose address it
// is:
//
//   - "ip:port" or "host:port" matches the one server at exactly that
//     address and port;
//   - failing that, "ip", or "ip:port" with another port (an exporter's),
//     matches the one server at that address (or host name, srv_fqdn);
//   - an address two servers share, with nothing to tell them apart, matches
//     neither (Ambiguous): guessing would give one server the other's load;
//   - an address no server has matches nothing (Unknown);
//   - two series that match one server leave it without data (Duplicate),
//     as two series of one name do.
//
// A server no series matches has no data: the policy's `missing` applies
// (its weight share is kept by default). Servers whose address is unset
// (0.0.0.0 or ::, a server-template slot not filled yet) match nothing.

// Match is how Servers matched a source's series to servers.
type Match struct {
	// Loads are the matched series, by server name.
	Loads weighter.Loads
	// Matched maps each series name used to its server.
	Matched map[string]string
	// Unknown are series names that no server's address matches, sorted.
	Unknown []string
	// Ambiguous maps a series name to the servers that share its address.
	Ambiguous map[string][]string
	// Duplicate maps a server to the series names (two or more) that matched it.
	Duplicate map[string][]string
}

// Servers renames loads, keyed by address as the source names them,
// to the servers those addresses belong to (see the rules above).
func Servers(loads weighter.Loads, servers []weighter.ServerState) Match {
	m := Match{Loads: weighter.Loads{}, Matched: map[string]string{}, Ambiguous: map[string][]string{}, Duplicate: map[string][]string{}}
	type key struct{ host, port string }
	exact := map[key][]string{} // host:port → servers
	byHost := map[string][]string{}
	for _, s := range servers {
		ip, port := splitAddress(s.Address)
		ip = normalHost(ip) // as a series' host is
		if a, err := netip.ParseAddr(ip); err == nil && a.IsUnspecified() {
			ip = ""
		}
		for _, h := range []string{ip, normalHost(s.Host)} {
			if h == "" || slices.Contains(byHost[h], s.Name) {
				continue
			}
			byHost[h] = append(byHost[h], s.Name)
			if port != "" {
				exact[key{h, port}] = append(exact[key{h, port}], s.Name)
			}
		}
	}
	by := map[string][]string{} // server → series names
	for _, name := range sortedNames(loads) {
		host, port := splitAddress(name)
		host = normalHost(host)
		candidates := exact[key{host, port}]
		if len(candidates) == 0 {
			candidates = byHost[host]
		}
		switch len(candidates) {
		case 0:
			m.Unknown = append(m.Unknown, name)
		case 1:
			by[candidates[0]] = append(by[candidates[0]], name)
		default:
			m.Ambiguous[name] = slices.Sorted(slices.Values(candidates))
		}
	}
	for server, names := range by {
		if len(names) > 1 {
			m.Duplicate[server] = names
			continue
		}
		m.Loads[server] = loads[names[0]]
		m.Matched[names[0]] = server
	}
	return m
}

// splitAddress cuts "host:port", "[v6]:port", "host" or a bare IPv6 address
// into host and port ("" when none).
func splitAddress(s string) (host, port string) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		host, after, _ := strings.Cut(rest, "]")
		return host, strings.TrimPrefix(after, ":")
	}
	if strings.Count(s, ":") == 1 {
		host, port, _ := strings.Cut(s, ":")
		return host, port
	}
	return s, "" // a name, an IPv4 address, or a bare IPv6 address
}

// normalHost is host as matching compares it: an IP address in its canonical
// form (an IPv4-mapped IPv6 one as IPv4), a name in lower case without a
// trailing dot.
func normalHost(host string) string {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

func sortedNames(loads weighter.Loads) []string {
	names := make([]string, 0, len(loads))
	for n := range loads {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

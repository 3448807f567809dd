package haproxycfg

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Listeners are where a backend's clients connect: the bind addresses of
// the frontends and listen sections that route to it, which the socket
// table reader filters HAProxy's accepted connections by (the clients
// pinning chooses from).
type Listeners struct {
	// Addrs are the TCP bind addresses of the proxies that route to the
	// backend alone, sorted, without duplicates; an unspecified address
	// (0.0.0.0, ::) is a wildcard bind.
	Addrs []netip.AddrPort
	// Shared are the proxies that route to the backend and to other
	// backends too (or by a rule whose backend is named at run time), e.g.
	// "frontend fe (line 12): also routes to be2". The socket table cannot
	// tell which backend a client's connection went to, so their binds
	// are not in Addrs: their clients are not measured.
	Shared []string
	// Skipped are the binds of the proxies in Addrs' that the socket table
	// cannot read a client address from, e.g. "frontend fe (line 14): bind
	// unix@/run/fe.sock: not a TCP address": a unix@ or abns@ socket, a
	// host name or environment variable the daemon cannot resolve as
	// HAProxy did, PROXY protocol (accept-proxy: the sockets' peer is the
	// proxy in front, not the client), another network namespace.
	Skipped []string
}

// maxPortRange bounds the ports one bind line's range (`bind :2000-2999`)
// is expanded to: each port is an entry of the kernel's filter.
const maxPortRange = 1024

// Listeners returns the bind addresses of the frontends and listen
// sections that route to backend: by `default_backend` (its own or its
// defaults section's), by `use_backend`, or a listen section named so
// (which serves itself unless it has a default_backend). A disabled proxy
// listens nowhere. An error when the file has no backend or listen section
// of that name.
func (f *File) Listeners(backend string) (Listeners, error) {
	if f.named("backend", backend) == nil && f.named("listen", backend) == nil {
		return Listeners{}, fmt.Errorf("%s: no backend or listen section %q", f.Path, backend)
	}
	var out Listeners
	for _, p := range f.sections {
		if p.kind != "frontend" && p.kind != "listen" || p.disabled() {
			continue
		}
		targets, dynamic := p.routes()
		here := fmt.Sprintf("%s %s (line %d)", p.kind, p.name, p.line)
		if !slices.Contains(targets, backend) {
			if dynamic {
				out.Shared = append(out.Shared, here+": may route to it by a use_backend rule whose backend is named at run time")
			}
			continue
		}
		others := slices.DeleteFunc(slices.Clone(targets), func(t string) bool { return t == backend })
		if len(others) > 0 || dynamic {
			why := ""
			if len(others) > 0 {
				why = "also routes to " + strings.Join(others, ", ")
			}
			if dynamic {
				why = strings.TrimPrefix(why+"; and by a use_backend rule whose backend is named at run time", "; and ")
			}
			out.Shared = append(out.Shared, here+": "+why)
			continue
		}
		for _, d := range p.body {
			if len(d.words) == 0 || d.words[0] != "bind" {
				continue
			}
			addrs, skip := parseBind(d.words[1:])
			if skip != "" {
				out.Skipped = append(out.Skipped, fmt.Sprintf("%s %s (line %d): %s", p.kind, p.name, d.line, skip))
			}
			out.Addrs = append(out.Addrs, addrs...)
		}
	}
	slices.SortFunc(out.Addrs, func(x, y netip.AddrPort) int { return x.Compare(y) })
	out.Addrs = slices.Compact(out.Addrs)
	return out, nil
}

// disabled reports whether the proxy is `disabled` (it binds nothing).
func (s *section) disabled() bool {
	d, ok := s.lookup(func(w []string) bool { return w[0] == "disabled" || w[0] == "enabled" })
	return ok && d.words[0] == "disabled" && len(d.words) == 1
}

// routes returns the backends a frontend or listen section sends its
// traffic to, sorted, and whether a use_backend rule names its backend at
// run time (a log-format expression, `%[…]`).
func (s *section) routes() (targets []string, dynamic bool) {
	add := func(name string) {
		if strings.Contains(name, "%[") || strings.Contains(name, "%{") {
			dynamic = true
			return
		}
		if !slices.Contains(targets, name) {
			targets = append(targets, name)
		}
	}
	def, ok := s.lookup(keyword("default_backend"))
	switch {
	case ok && len(def.words) > 1:
		add(def.words[1])
	case s.kind == "listen":
		add(s.name) // serves itself
	}
	for _, d := range s.body {
		if d.words[0] == "use_backend" && len(d.words) > 1 {
			add(d.words[1])
		}
	}
	slices.Sort(targets)
	return targets, dynamic
}

// parseBind reads a bind line's words (the addresses, comma-separated, then
// its options): the TCP addresses the socket table can show, and why some
// or all are skipped ("" when none is).
func parseBind(words []string) ([]netip.AddrPort, string) {
	if len(words) == 0 {
		return nil, "bind without an address"
	}
	for i, w := range words[1:] {
		switch w {
		case "accept-proxy":
			return nil, "bind " + words[0] + " accept-proxy: the connections come through a proxy (PROXY protocol), whose address the socket table shows, not the client's"
		case "namespace":
			if i+2 < len(words) {
				return nil, "bind " + words[0] + " namespace " + words[i+2] + ": in another network namespace than the daemon reads"
			}
		}
	}
	var out []netip.AddrPort
	var skipped []string
	for a := range strings.SplitSeq(words[0], ",") {
		got, err := parseBindAddr(a)
		if err != nil {
			skipped = append(skipped, "bind "+a+": "+err.Error())
			continue
		}
		out = append(out, got...)
	}
	return out, strings.Join(skipped, "; ")
}

// parseBindAddr reads one bind address as HAProxy 2.6 to 3.4 spell a TCP
// one: [ipv4@|ipv6@|tcp@|tcp4@|tcp6@]<host>:<port>[-<port>], the host an
// IPv4 address, an IPv6 one (bracketed or not), or empty or * for every
// address (IPv4's, unless the prefix says IPv6).
func parseBindAddr(a string) ([]netip.AddrPort, error) {
	if strings.Contains(a, "$") {
		return nil, fmt.Errorf("an environment variable: HAProxy's environment is not the daemon's")
	}
	v6 := false
	if prefix, rest, ok := strings.Cut(a, "@"); ok {
		switch prefix {
		case "ipv4", "tcp", "tcp4":
		case "ipv6", "tcp6":
			v6 = true
		default:
			return nil, fmt.Errorf("not a TCP address (%s@)", prefix)
		}
		a = rest
	}
	if strings.HasPrefix(a, "/") {
		return nil, fmt.Errorf("not a TCP address (a unix socket)")
	}
	i := strings.LastIndexByte(a, ':')
	if i < 0 {
		return nil, fmt.Errorf("no port")
	}
	host, ports := a[:i], a[i+1:]
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	var addr netip.Addr
	switch host {
	case "", "*":
		addr = netip.IPv4Unspecified()
		if v6 {
			addr = netip.IPv6Unspecified()
		}
	default:
		var err error
		if addr, err = netip.ParseAddr(host); err != nil {
			return nil, fmt.Errorf("a host name or an address the daemon cannot read as HAProxy resolved it")
		}
		addr = addr.Unmap()
		if v6 && addr.Is4() {
			return nil, fmt.Errorf("an IPv4 address with an IPv6 prefix")
		}
	}
	lo, hi, err := portRange(ports)
	if err != nil {
		return nil, err
	}
	out := make([]netip.AddrPort, 0, hi-lo+1)
	for p := lo; p <= hi; p++ {
		out = append(out, netip.AddrPortFrom(addr, uint16(p)))
	}
	return out, nil
}

// portRange reads "2003" or "2000-2010".
func portRange(s string) (lo, hi int, err error) {
	from, to, isRange := strings.Cut(s, "-")
	lo, err = strconv.Atoi(from)
	if err != nil || lo < 1 || lo > 65535 {
		return 0, 0, fmt.Errorf("port %q", s)
	}
	hi = lo
	if isRange {
		hi, err = strconv.Atoi(to)
		if err != nil || hi < lo || hi > 65535 {
			return 0, 0, fmt.Errorf("port range %q", s)
		}
	}
	if hi-lo+1 > maxPortRange {
		return 0, 0, fmt.Errorf("port range %q: more than %d ports", s, maxPortRange)
	}
	return lo, hi, nil
}

package haproxycfg

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Expected is what the daemon will do with one HAProxy backend, as far as
// the checks need to know.
type Expected struct {
	Name string
	// Socket is the runtime socket (unix path or host:port) the daemon
	// writes this backend's weights on; "" when it is not a stats socket of
	// the file (the master CLI): not checked.
	Socket string
	// Servers are the server names the daemon's configuration names
	// (server_map targets); the others come from HAProxy itself.
	Servers []string
	// StatBytes is set when the load is `show stat`'s byte counters
	// (source haproxy, bytes_in or bytes_out).
	StatBytes bool
	// FastSignal is set when the backend weighs by `show sess all`, which
	// moves live without contstats; `show stat` is then its fallback.
	FastSignal bool
	// Pin is set when the daemon pins the backend's heavy clients to
	// servers through its stick table (check_pin.go).
	Pin bool
	// PinIfTable is set when the daemon pins the backend's clients if it
	// has the table (the default): its stick lines are checked when it has
	// any, and a backend without one is not warned about.
	PinIfTable bool
	// PinShared is set when the daemon's pin policy says the table is
	// shared between balancers (pin.shared).
	PinShared bool
}

// Warning is one thing in the configuration file that keeps the daemon
// from weighting a backend as configured.
type Warning struct {
	Path string
	// Line is the line the warning is about, 0 when it is about something
	// the file lacks.
	Line int
	// Backend is the backend it is about, "" for the global section.
	Backend string
	Text    string
}

// String is the warning as validate prints it and run logs it, in the
// compiler form (gcc, go vet) of the daemon's own configuration warnings:
// "file:line: warning: backend name: text".
func (w Warning) String() string {
	var b strings.Builder
	b.WriteString(w.Path)
	if w.Line > 0 {
		b.WriteString(":" + strconv.Itoa(w.Line))
	}
	b.WriteString(": warning: ")
	if w.Backend != "" {
		b.WriteString("backend " + w.Backend + ": ")
	}
	b.WriteString(w.Text)
	return b.String()
}

// Check returns what in f keeps the daemon from weighting backends, in the
// order of backends: first each socket, then each backend.
func (f *File) Check(backends []Expected) []Warning {
	var out []Warning
	var sockets []string
	for _, b := range backends {
		if b.Socket != "" && !slices.Contains(sockets, b.Socket) {
			sockets = append(sockets, b.Socket)
			out = append(out, f.checkSocket(b.Socket)...)
		}
	}
	for _, b := range backends {
		out = append(out, f.checkBackend(b)...)
	}
	return out
}

func (f *File) warn(d directive, backend, format string, args ...any) Warning {
	return Warning{Path: f.Path, Line: d.line, Backend: backend, Text: fmt.Sprintf(format, args...)}
}

func (f *File) checkBackend(b Expected) []Warning {
	s := f.proxy(b.Name)
	switch {
	case s == nil:
		return []Warning{f.warn(directive{}, b.Name, "no backend or listen section of that name")}
	case s.kind == "frontend":
		return []Warning{f.warn(directive{line: s.line}, b.Name, "is a frontend, which has no servers; weights go to a backend or listen section")}
	}
	var out []Warning
	if d, ok := s.own(keyword("disabled")); ok {
		out = append(out, f.warn(d, b.Name, "disabled: HAProxy does not start it"))
	}
	if w, ok := f.checkBalance(s, b.Name); ok {
		out = append(out, w)
	}
	out = append(out, f.checkServers(s, b)...)
	if b.StatBytes {
		if w, ok := f.checkContstats(s, b); ok {
			out = append(out, w)
		}
	}
	if w, ok := f.checkServerState(s, b.Name); ok {
		out = append(out, w)
	}
	if b.Pin || (b.PinIfTable && s.hasStick()) {
		out = append(out, f.checkPins(s, b.Name)...)
		out = append(out, f.checkPinPeers(s, b.Name, b.PinShared)...)
	}
	return out
}

// own returns the last directive of s itself (not its defaults) that match
// accepts.
func (s *section) own(match func([]string) bool) (directive, bool) {
	for i := len(s.body) - 1; i >= 0; i-- {
		if match(s.body[i].words) {
			return s.body[i], true
		}
	}
	return directive{}, false
}

// Hash-based algorithms: static unless `hash-type consistent`.
var hashAlgos = map[string]bool{"source": true, "uri": true, "url_param": true, "hdr": true, "rdp-cookie": true, "hash": true}

// checkBalance warns about an algorithm whose server weights cannot change
// at runtime. HAProxy 2.6's configuration manual (section 4.2, "balance"):
// static-rr is "static, which means that changing a server's weight on the
// fly will have no effect"; first "ignores the server weight"; source, uri,
// url_param, hdr, rdp-cookie and hash are "static by default ... but this
// can be changed using hash-type", whose map-based method (the default) is
// "static in that weight changes while a server is up will be ignored",
// while consistent "supports changing weights while the servers are up".
// Its management guide ("set weight") adds that for a static algorithm "the
// only accepted values are 0 and 100%". roundrobin (the default), leastconn
// and random are dynamic.
func (f *File) checkBalance(s *section, backend string) (Warning, bool) {
	d, ok := s.lookup(keyword("balance"))
	if !ok || len(d.words) < 2 {
		return Warning{}, false // roundrobin
	}
	algo, _, _ := strings.Cut(d.words[1], "(")
	switch {
	case algo == "static-rr":
		return f.warn(d, backend, "balance static-rr: HAProxy takes no runtime weight but 0 and 100%%; use roundrobin or leastconn"), true
	case algo == "first":
		return f.warn(d, backend, "balance first ignores server weights; use roundrobin or leastconn"), true
	case hashAlgos[algo]:
		ht, ok := s.lookup(keyword("hash-type"))
		if ok && len(ht.words) > 1 && ht.words[1] == "consistent" {
			return Warning{}, false
		}
		if ok {
			d = ht
		}
		return f.warn(d, backend, "balance %s with hash-type map-based (the default) ignores runtime weight changes; add hash-type consistent", algo), true
	}
	return Warning{}, false
}

// checkServers warns about a server the daemon's configuration names that
// the section does not declare, and about servers with agent-check: an
// agent's reply may carry a weight, which then overwrites the daemon's.
func (f *File) checkServers(s *section, b Expected) []Warning {
	var out []Warning
	for _, name := range b.Servers {
		if !s.declares(name) {
			out = append(out, f.warn(directive{line: s.line}, b.Name, "server %s (named by server_map) is declared by no server or server-template line", name))
		}
	}
	agentDefault := false
	if d, ok := s.lookup(keyword("default-server")); ok {
		agentDefault = hasAgentCheck(d.words[1:], false)
	}
	var agents []string
	first := directive{}
	for _, d := range s.body {
		if len(d.words) >= 2 && (d.words[0] == "server" || d.words[0] == "server-template") && hasAgentCheck(d.words[2:], agentDefault) {
			if first.line == 0 {
				first = d
			}
			agents = append(agents, d.words[1])
		}
	}
	if len(agents) > 0 {
		out = append(out, f.warn(first, b.Name, "agent-check on server %s: a weight in the agent's reply overwrites the daemon's", strings.Join(agents, ", ")))
	}
	return out
}

// hasAgentCheck reports whether server options enable agent-check, starting
// from def (the default-server's).
func hasAgentCheck(opts []string, def bool) bool {
	on := def
	for _, o := range opts {
		switch o {
		case "agent-check":
			on = true
		case "no-agent-check":
			on = false
		}
	}
	return on
}

// declares reports whether a server or server-template line of s names a
// server called name. `server-template web 1-3 ...` (or `web 3`) declares
// web1, web2 and web3.
func (s *section) declares(name string) bool {
	for _, d := range s.body {
		w := d.words
		switch {
		case len(w) >= 2 && w[0] == "server" && w[1] == name:
			return true
		case len(w) >= 3 && w[0] == "server-template" && strings.HasPrefix(name, w[1]):
			n, err := strconv.Atoi(strings.TrimPrefix(name, w[1]))
			if err != nil || strings.HasPrefix(strings.TrimPrefix(name, w[1]), "0") {
				continue
			}
			lo, hi, isRange := strings.Cut(w[2], "-")
			from, to := 1, 0
			if isRange {
				from, _ = strconv.Atoi(lo)
				to, _ = strconv.Atoi(hi)
			} else {
				to, _ = strconv.Atoi(lo)
			}
			if n >= from && n <= to {
				return true
			}
		}
	}
	return false
}

// checkContstats warns when show stat's byte counters are the load and the
// frontends that route to the backend lack `option contstats`. Without it
// HAProxy counts a connection's bytes when it closes; with it, about every
// 5 s. It is a frontend option (configuration.txt, "option contstats": not
// in backends), so it is looked up in the listen section itself, or in the
// frontends and listens whose default_backend or use_backend name the
// backend, or choose it by a %[...] expression.
func (f *File) checkContstats(s *section, b Expected) (Warning, bool) {
	var lacking []string
	for _, fe := range f.sections {
		if (fe.kind != "frontend" && fe.kind != "listen") || (fe != s && !fe.routesTo(b.Name)) {
			continue
		}
		if on, _ := fe.option("contstats"); !on {
			lacking = append(lacking, fe.kind+" "+fe.name)
		}
	}
	if len(lacking) == 0 {
		return Warning{}, false
	}
	what := "source haproxy reads byte counters"
	if b.FastSignal {
		what = "when the fast signal is dead, source haproxy reads byte counters"
	}
	return f.warn(directive{line: s.line}, b.Name, "%s, which count an open connection's bytes only when it closes without option contstats (add it to %s)",
		what, strings.Join(lacking, ", ")), true
}

// routesTo reports whether a frontend's default_backend or use_backend
// names backend, or picks its backend by a sample expression.
func (s *section) routesTo(backend string) bool {
	for _, d := range s.body {
		w := d.words
		if len(w) >= 2 && (w[0] == "default_backend" || w[0] == "use_backend") &&
			(w[1] == backend || strings.Contains(w[1], "%[")) {
			return true
		}
	}
	return false
}

// checkServerState warns when a reload loses the weights: HAProxy starts
// each new process at the weights of the file, unless it loads the servers'
// state (`show servers state`, saved before the reload) from a
// server-state-file (configuration.txt, "load-server-state-from-file").
func (f *File) checkServerState(s *section, backend string) (Warning, bool) {
	const lost = "weights go back to the file's at each HAProxy reload"
	d, ok := s.lookup(keyword("load-server-state-from-file"))
	mode := "none"
	if ok && len(d.words) > 1 {
		mode = d.words[1]
	}
	switch mode {
	case "local":
		return Warning{}, false
	case "global":
		for _, g := range f.global {
			if len(g.words) > 1 && g.words[0] == "server-state-file" {
				return Warning{}, false
			}
		}
		return f.warn(d, backend, "%s: load-server-state-from-file global, but no server-state-file in global", lost), true
	}
	if !ok {
		d = directive{line: s.line}
	}
	return f.warn(d, backend, "%s: no load-server-state-from-file (with server-state-file in global)", lost), true
}

// checkSocket warns when the global section declares no stats socket at
// the daemon's socket, or one below level admin: `set weight` "is
// restricted and can only be issued on sockets configured for level admin"
// (management.txt), and a stats socket is level operator by default.
func (f *File) checkSocket(socket string) []Warning {
	prefix := ""
	for _, d := range f.global {
		if len(d.words) > 2 && d.words[0] == "unix-bind" {
			for i := 1; i+1 < len(d.words); i++ {
				if d.words[i] == "prefix" {
					prefix = d.words[i+1]
				}
			}
		}
	}
	for _, d := range f.global {
		if len(d.words) < 3 || d.words[0] != "stats" || d.words[1] != "socket" || !sameSocket(d.words[2], prefix, socket) {
			continue
		}
		level, given := "operator", false
		for i := 3; i+1 < len(d.words); i++ {
			if d.words[i] == "level" {
				level, given = d.words[i+1], true
			}
		}
		if level == "admin" {
			return nil
		}
		if !given {
			level += " (the default)"
		}
		return []Warning{f.warn(d, "", "stats socket %s is level %s: setting weights needs level admin", d.words[2], level)}
	}
	return []Warning{f.warn(directive{}, "", "no stats socket at %s (haproxy.socket) in the global section", socket)}
}

// sameSocket reports whether a stats socket address, as HAProxy reads it
// (unix path, optionally unix@, prefixed by unix-bind's prefix; or
// [ipv4@|ipv6@]host:port, host empty or * for any), is the daemon's socket.
func sameSocket(addr, unixPrefix, socket string) bool {
	network, rest, ok := strings.Cut(addr, "@")
	if !ok {
		network, rest = "", addr
	}
	isUnix := network == "unix" || (network == "" && (strings.HasPrefix(rest, "/") || strings.HasPrefix(rest, ".") || !strings.Contains(rest, ":")))
	if isUnix {
		return filepath.Clean(unixPrefix+rest) == filepath.Clean(socket)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return false
	}
	wantHost, wantPort, err := net.SplitHostPort(socket)
	if err != nil || port != wantPort {
		return false
	}
	switch host {
	case "", "*", "0.0.0.0", "::":
		return true
	}
	return host == wantHost || (wantHost == "localhost" && (host == "127.0.0.1" || host == "::1"))
}

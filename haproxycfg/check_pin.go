package haproxycfg

import (
	"slices"
	"strings"
)

// The lines a backend needs for the daemon to pin clients (haproxy/pins.go):
// its own stick table keyed on the client's address, and a match on it that
// writes nothing (the daemon writes the entries).
const (
	pinTableLine = "stick-table type ip size 100k expire 2h"
	pinMatchLine = "stick match src"
)

// checkPins warns about what keeps the daemon's pins from working in a
// backend it pins: no stick table of its own keyed on an address (type ip
// or ipv6), no `stick match src` on it, rules that make HAProxy write
// entries itself (`stick on`, `stick store-request`, `stick
// store-response`: they would overwrite the daemon's pins with wherever the
// balancing sent a client), or a table without `expire` (entries would
// never leave: a client gone keeps its entry until the table is full, and
// HAProxy then evicts entries silently).
func (f *File) checkPins(s *section, backend string) []Warning {
	var out []Warning
	table, hasTable := s.own(keyword("stick-table"))
	typ := ""
	if hasTable {
		typ = optionValue(table.words[1:], "type")
	}
	_, hasMatch := s.own(func(w []string) bool { return isStick(w, "match") && stickOnSrc(w, backend) })
	var writers []directive
	for _, d := range s.body {
		if isStick(d.words, "on") || isStick(d.words, "store-request") || isStick(d.words, "store-response") {
			writers = append(writers, d)
		}
	}
	onSrc := slices.ContainsFunc(writers, func(d directive) bool { return isStick(d.words, "on") && stickOnSrc(d.words, backend) })
	switch {
	case !hasTable && !hasMatch && !onSrc:
		out = append(out, f.warn(directive{line: s.line}, backend,
			"clients cannot be pinned: the backend has no stick-table keyed on the client's address and no stick match src; add the two lines `%s` and `%s`",
			pinTableLine, pinMatchLine))
	case !hasTable:
		out = append(out, f.warn(directive{line: s.line}, backend,
			"clients cannot be pinned: the backend has no stick-table of its own; add `%s`", pinTableLine))
	case typ != "ip" && typ != "ipv6":
		out = append(out, f.warn(table, backend,
			"clients cannot be pinned: stick-table type %s is not keyed on the client's address; make it `%s` (or type ipv6)", typ, pinTableLine))
	}
	if hasTable && !hasMatch && !onSrc {
		out = append(out, f.warn(table, backend,
			"clients cannot be pinned: no stick match src, so HAProxy never looks the pins up; add `%s`", pinMatchLine))
	}
	for _, d := range writers {
		out = append(out, f.warn(d, backend,
			"%s makes HAProxy write stick-table entries itself, which overwrite the daemon's pins; use `%s` alone",
			strings.Join(d.words[:2], " "), pinMatchLine))
	}
	if hasTable && (typ == "ip" || typ == "ipv6") && optionValue(table.words[1:], "expire") == "" {
		out = append(out, f.warn(table, backend,
			"stick-table without expire: an entry never leaves (a client gone keeps its pin until the table is full, when HAProxy evicts entries silently); add expire, as in `%s`",
			pinTableLine))
	}
	return out
}

// checkPinPeers warns when the pin table is replicated to other balancers
// (`peers <section>` on the stick-table, a section naming more than one
// peer) and the daemon does not know it (pin.shared off): it would take the
// other balancers' pins for its own and forget those of clients it does not
// see, and they would come back from the peers at the next update.
func (f *File) checkPinPeers(s *section, backend string, shared bool) []Warning {
	table, ok := s.own(keyword("stick-table"))
	if !ok || shared {
		return nil
	}
	name := optionValue(table.words[1:], "peers")
	p := f.named("peers", name)
	if name == "" || p == nil {
		return nil
	}
	n := 0
	for _, d := range p.body {
		if len(d.words) >= 2 && (d.words[0] == "peer" || d.words[0] == "server") {
			n++
		}
	}
	if n < 2 {
		return nil // the local host alone: the table kept across a reload
	}
	return []Warning{f.warn(table, backend,
		"the pin table is replicated to %d peers (peers %s): other balancers' daemons write pins in it too; set `pin: {shared: true}` so that this daemon leaves theirs alone",
		n, name)}
}

// hasStick reports whether the section has a stick-table or a stick rule:
// a backend meant to pin (or to stick) whose lines are then checked.
func (s *section) hasStick() bool {
	_, ok := s.own(func(w []string) bool { return len(w) > 0 && (w[0] == "stick-table" || w[0] == "stick") })
	return ok
}

// isStick reports whether words are a `stick <kind> …` rule.
func isStick(words []string, kind string) bool {
	return len(words) >= 3 && words[0] == "stick" && words[1] == kind
}

// stickOnSrc reports whether a `stick match|on` rule matches the client's
// source address (`src`, or `src,ipmask(…)` and the like would key on
// another value: only plain src) in the backend's own table.
func stickOnSrc(words []string, backend string) bool {
	if words[2] != "src" {
		return false
	}
	t := optionValue(words[3:], "table")
	return t == "" || t == backend
}

// optionValue is the word after name in words, "" when name is not there.
func optionValue(words []string, name string) string {
	for i := 0; i+1 < len(words); i++ {
		if words[i] == name {
			return words[i+1]
		}
	}
	return ""
}

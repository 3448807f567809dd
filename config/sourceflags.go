package config

import (
	"strings"

	"github.com/haproxy-weighter/haproxy-weighter/sourcekind"
)

// SourceFlag is a command-line flag of run and once that sets one key of a
// source kind, for a backend given by flags (FromFlags). Each kind says its
// own (sourcekind.Spec.Flags).
type SourceFlag struct {
	Kind  string
	Name  string // without the leading --
	Usage string
	// Key is the YAML key the flag sets, so problems with it name the flag.
	Key string
	// Bool makes a flag that takes no value; it is given as "true".
	Bool bool
	// Message is how the kind's messages about Key start, when not
	// "<kind>: <key>:"; problems given by flags have it replaced by the flag.
	Message string
	set     func(s *Source, value string)
}

// sourceFlags lists every source flag, kind by kind in the registry's order,
// the first of each kind first: that one names the kind in "give
// --prometheus-url, --graphite-url or --haproxy-counter". A flag sets its
// kind's configuration, with the kind's defaults when it is the first given.
func sourceFlags() []SourceFlag {
	var out []SourceFlag
	for _, k := range sourcekind.All() {
		for _, f := range k.Flags() {
			out = append(out, SourceFlag{Kind: k.Name(), Name: f.Name, Usage: f.Usage, Key: f.Key, Bool: f.Bool, Message: f.Message,
				set: func(s *Source, v string) { f.Set(s.configOf(k), v) }})
		}
	}
	return out
}

// SourceFlags returns every source flag, the first of each kind first.
func SourceFlags() []SourceFlag { return sourceFlags() }

// SourceChoice names each kind's first flag: "--prometheus-url, --graphite-url or --haproxy-counter".
func SourceChoice() string {
	var each []string
	for _, f := range firstSourceFlags() {
		each = append(each, "--"+f.Name)
	}
	return strings.Join(each[:len(each)-1], ", ") + " or " + each[len(each)-1]
}

// message is how the kind's messages about the flag's key start.
func (f SourceFlag) message() string {
	if f.Message != "" {
		return f.Message
	}
	return f.Kind + ": " + f.Key + ":"
}

// firstSourceFlags returns each kind's first flag, in the kinds' order.
func firstSourceFlags() []SourceFlag {
	var out []SourceFlag
	for _, f := range sourceFlags() {
		if len(out) == 0 || out[len(out)-1].Kind != f.Kind {
			out = append(out, f)
		}
	}
	return out
}

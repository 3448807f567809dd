package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/errs"
)

// Flags describe a single backend on the command line, without a file.
// Empty strings and nil pointers mean "not given".
type Flags struct {
	Socket  string
	Backend string
	// Source holds the source flags (SourceFlags) given a
	// value, by flag name: "prometheus-url" → "http://…"; a flag that takes no
	// value ("per-connection") holds "true".
	Source         map[string]string
	Function       string
	LimitingFactor *float64
	Aggressiveness *float64
	Interval       time.Duration
	Listen         *string
	FastSignal     string // "on", "off" or "" (the default, on)
	// Master: Socket is HAProxy's master CLI (haproxy.Config.Master).
	Master bool
	// Match is the backend's match: "name", "address" or "" (name).
	Match string
}

// FromFlags builds a one-backend configuration from flags, over the same
// defaults and through the same validation as a file, so both say the same
// things; problems are worded by flag (FlagsError).
func FromFlags(f Flags) (*Config, error) {
	if f.Backend == "" {
		return nil, errors.New("--backend is required without --config")
	}
	cfg := Default()
	if f.Socket != "" {
		cfg.HAProxy.Socket = f.Socket
	}
	cfg.HAProxy.Master = f.Master
	if f.Interval != 0 {
		cfg.Interval = duration.Duration(f.Interval)
	}
	if f.Listen != nil {
		cfg.Listen = *f.Listen
	}
	b := newBackend()
	b.Name = f.Backend
	b.Function = cmp.Or(f.Function, b.Function)
	if f.LimitingFactor != nil {
		b.LimitingFactor = *f.LimitingFactor
	}
	if f.Aggressiveness != nil {
		b.Aggressiveness = *f.Aggressiveness
	}
	b.FastSignal = cmp.Or(f.FastSignal, b.FastSignal)
	b.Match = f.Match
	// No environment expansion: a ${...} in a flag (a Graphite template, a
	// PromQL named group) is meant literally, and the shell has expanded the rest.
	// Flags of several kinds set several kinds: validation says "more than one".
	for _, fl := range sourceFlags() {
		if v := f.Source[fl.Name]; v != "" {
			fl.set(&b.Source, v)
		}
	}
	cfg.Backends = []Backend{b}
	if err := cfg.Validate(); err != nil {
		return nil, FlagsError(err)
	}
	return &cfg, nil
}

// FlagsError rewrites the validation problems of a configuration that
// flags made (FromFlags, or --interval and --listen over a file) in terms
// of the flags: a backend's position ("backends[0] (b):") would only
// puzzle, and "limiting_factor must be" reads "--limiting-factor must be".
// One line per problem.
func FlagsError(err error) error {
	names := flagNames()
	var out []error
	for _, leaf := range errs.Leaves(err) {
		msg := leaf.Error()
		var fe *FieldError
		if errors.As(leaf, &fe) {
			msg = fe.Err.Error() // without the backend's position
		}
		// A source joins its problems under one prefix ("source: prometheus:
		// url: …\nquery: …"): each line gets the prefix back before mapping.
		lines := strings.Split(msg, "\n")
		prefix := ""
		for _, k := range firstSourceFlags() {
			if p := "source: " + k.Kind + ": "; strings.HasPrefix(lines[0], p) {
				prefix = p
			}
		}
		for i, line := range lines {
			if i > 0 {
				line = prefix + line
			}
			out = append(out, errors.New(flagMessage(names, line)))
		}
	}
	return errors.Join(out...)
}

type flagName struct{ key, flag string }

// flagNames maps the start of a message about a key FromFlags sets to the
// flag that set it; messages keep their own form: "limiting_factor must be"
// becomes "--limiting-factor must be", "interval: must be" "--interval: must be".
func flagNames() []flagName {
	var names []flagName
	for _, f := range sourceFlags() {
		flag := "--" + f.Name
		if strings.HasSuffix(f.message(), ":") {
			flag += ":"
		}
		names = append(names, flagName{"source: " + f.message(), flag})
	}
	// The longest first: "haproxy source: per_connection" before "haproxy source:".
	slices.SortStableFunc(names, func(a, b flagName) int { return len(b.key) - len(a.key) })
	list := SourceChoice()
	all := kindNames()
	return append([]flagName{
		{fmt.Sprintf("source: missing (one of %s)", all), "no load source: give " + list},
		{fmt.Sprintf("source: more than one of %s", all), "more than one load source: give one of " + list},
	}, append(names,
		flagName{"haproxy: socket", "--socket"},
		flagName{"interval:", "--interval:"},
		flagName{"listen:", "--listen:"},
		flagName{"name:", "--backend:"},
		flagName{"function ", "--function "},
		flagName{"limiting_factor ", "--limiting-factor "},
		flagName{"aggressiveness ", "--aggressiveness "},
		flagName{"fast_signal:", "--fast-signal:"},
		flagName{"match:", "--match:"},
	)...)
}

func flagMessage(names []flagName, msg string) string {
	for _, n := range names {
		if strings.HasPrefix(msg, n.key) {
			return n.flag + strings.TrimPrefix(msg, n.key)
		}
	}
	return msg
}

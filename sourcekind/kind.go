// Package sourcekind holds the kinds of load source a backend names under
// `source:` (prometheus, graphite, haproxy), each in one file of its own
// that says everything about it: its YAML defaults, its validation, its
// server_map, the window its points average over, the bytes the fast signal
// weighs for it, whether it calibrates, its command-line flags and how it is
// built. Each is registered once, in registry.go. Package config decodes,
// validates and describes a source through these kinds, and never builds
// one: the daemon and validate do, with Build. Nothing outside a kind's own
// file names the kind (a test).
package sourcekind

import (
	"log/slog"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Spec is everything about one source kind whose configuration is C. A
// function left nil has the default its comment says.
type Spec[C any] struct {
	// Name is the kind's key under source: and in messages.
	Name string
	// Default returns the configuration with its defaults, which the keys
	// not written keep.
	Default func() C
	// Validate checks the configuration; each message starts with the
	// kind's name and the key it is about ("prometheus: query: must be set").
	// nil: nothing to check.
	Validate func(*C) error
	// ServerMap returns the configuration's series → server names; nil: the
	// kind has none.
	ServerMap func(*C) map[string]string
	// Window is the span the kind's points average over, for the
	// calibration; nil: the configuration does not say it.
	Window func(*C) Window
	// FastBytes says which bytes the fast signal weighs for this source, or
	// false when the fast signal cannot stand for what it measures (a
	// session count): the source is then used as it is. nil: false.
	FastBytes func(*C) (weighter.Bytes, bool)
	// Calibrates: the source is an external metric that calibrates
	// HAProxy's fast signal, rather than only standing in for it.
	Calibrates bool
	// ReadsHAProxy: the source reads HAProxy's statistics through the
	// runtime socket, so it cannot feed an IPVS service, and validate cannot
	// build it (there is no socket to read through).
	ReadsHAProxy bool
	// ForOneCycle returns the configuration set up for a single cycle
	// (`once`) and how long that cycle's first fetch waits; nil: as it is,
	// no wait.
	ForOneCycle func(C) (C, time.Duration)
	// Unit is the unit of the source's loads, for the status page, when
	// the configuration says it; nil: it does not (a query answers in
	// whatever it measures).
	Unit func(*C) (Unit, bool)
	// Flags are the kind's flags of run and once, for a backend given by
	// flags; the first names the kind in "give --prometheus-url, ...".
	Flags []Flag[C]
	// Build makes the source; it contacts nothing.
	Build func(C, Env) (weighter.Source, error)
}

// Flag is a command-line flag of run and once that sets one key of a kind's
// configuration C.
type Flag[C any] struct {
	Name  string // without the leading --
	Usage string
	// Key is the YAML key the flag sets, so problems with it name the flag.
	Key string
	// Bool makes a flag that takes no value; it is given as "true".
	Bool bool
	// Message is how the kind's messages about Key start, when not
	// "<kind>: <key>:"; problems given by flags have it replaced by the flag.
	Message string
	// Set sets the key to value.
	Set func(c *C, value string)
}

// Window is the span an external metric's points average over, for the
// calibration (docs/research/fresh-by-default.md: the local load is averaged
// over the same span, ending at the point's time).
type Window struct {
	// Span is the window; 0 when the configuration does not say it.
	Span time.Duration
	// FromStep: each point covers its series' step and is stamped at the
	// step's start (Graphite), so the span is learnt from the series.
	FromStep bool
	// How says where Span came from, for the start log ("the query's [1m]").
	How string
	// Assumed: nothing said the window; Span is a default.
	Assumed bool
}

// Unit is a unit of a source's loads: the symbol written after a number and
// its prefix ("B/s"), how a column's header says it ("new sessions/s"), and
// whether each load is per open connection rather than the server's.
type Unit struct {
	Symbol, Header string
	PerConnection  bool
}

// Env is what building a source may need besides its configuration.
type Env struct {
	// Backend is the name of the backend the source feeds.
	Backend string
	// Stats reads the backend's HAProxy statistics; nil for an IPVS service
	// and in validate, which contacts nothing.
	Stats haproxy.StatsReader
	// Log may be nil.
	Log *slog.Logger
}

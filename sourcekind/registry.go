// Package sourcekind is the one list of load source kinds. Each kind (one
// file here) gives its key under `source:`, its configuration type with
// defaults and validation, its command-line flags and its constructor; config
// decodes and checks `source:` through it, the daemon builds sources through
// it and validate builds them offline through it. A new kind is a new file.
package sourcekind

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Env is what a constructor may need besides the kind's configuration.
type Env struct {
	// Backend is the name of the backend the source feeds.
	Backend string
	// Stats reads the backend's HAProxy statistics; nil for an IPVS service
	// and in validate, which contacts nothing.
	Stats haproxy.StatsReader
	// Log may be nil.
	Log *slog.Logger
}

// Spec describes a kind whose configuration is a C. Register turns it into a Kind.
type Spec[C any] struct {
	// Name is the key under `source:`.
	Name string
	// Rank orders kinds in lists and messages (the README's order).
	Rank int
	// Default returns the configuration keys left out of the file take.
	Default func() C
	// Validate checks a decoded configuration; each message starts with the
	// kind's name and the key it is about ("prometheus: query: must be set"),
	// and a problem of one key is a field.Error naming it (field.Errorf),
	// which the configuration reports at that key's line.
	Validate func(C) error
	// New builds the source. It must not contact anything: validate calls it.
	New func(C, Env) (weighter.Source, error)
	// ServerMap, if set, returns the configuration's series → server names,
	// which must be names HAProxy's runtime socket can carry.
	ServerMap func(C) map[string]string
	// ReadsHAProxy marks a kind that reads the backend's HAProxy statistics:
	// it needs the runtime socket, cannot feed an IPVS service, and validate
	// cannot build it (there is no socket to read through).
	ReadsHAProxy bool
	// Flags describe one backend's source of this kind on the command line.
	Flags []Flag[C]
	// Window, if set, makes the kind an external metric that calibrates
	// HAProxy's fast signal: it says the span each of its points averages
	// over. A kind without it (HAProxy's own statistics) is only the fast
	// signal's fallback.
	Window func(C) Window
	// FastBytes, if set, says which bytes the fast signal weighs for this
	// configuration, or false when the fast signal cannot stand for it (a
	// session count): the source is then used as it is. Unset: both
	// directions for a kind that calibrates (Window), none for the others, so
	// that a new kind is used as it is until it says otherwise.
	FastBytes func(C) (weighter.Bytes, bool)
}

// Window is the span an external metric's points average over, for the
// calibration (docs/fresh-by-default.md: the local load is averaged over the
// same span, ending at the point's time).
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

// Flag is a command-line flag that sets one key of a kind's configuration.
type Flag[C any] struct {
	Name  string // without the leading --
	Usage string
	// Key is the YAML key the flag sets, so problems with it name the flag.
	Key string
	// Bool makes a flag that takes no value; Set then gets "true".
	Bool bool
	// Message is how the kind's messages about Key start, when not
	// "<kind>: <key>:"; problems given by flags have it replaced by the flag.
	Message string
	Set     func(c *C, value string)
}

// Kind is one registered source kind, its configuration type erased.
type Kind struct {
	Name         string
	ReadsHAProxy bool
	Flags        []KindFlag

	rank       int
	configType reflect.Type // the configuration's type, not a pointer
	defaults   func() any   // a pointer to a new configuration with its defaults
	validate   func(any) error
	build      func(any, Env) (weighter.Source, error)
	serverMap  func(any) map[string]string
	window     func(any) Window
	fastBytes  func(any) (weighter.Bytes, bool)
}

// KindFlag is a Flag of some kind.
type KindFlag struct {
	Name, Usage, Key string
	Bool             bool
	// Message is how the kind's messages about Key start ("prometheus: url:").
	Message string
	set     func(cfg any, value string)
}

var (
	mu    sync.RWMutex
	kinds = map[string]*Kind{}
)

// Register adds a kind. It panics on a second kind of the same name: two
// files claiming one key is a programming error.
func Register[C any](s Spec[C]) *Kind {
	k := &Kind{
		Name: s.Name, ReadsHAProxy: s.ReadsHAProxy, rank: s.Rank,
		configType: reflect.TypeFor[C](),
		defaults:   func() any { c := s.Default(); return &c },
		validate:   func(c any) error { return s.Validate(*c.(*C)) },
		build:      func(c any, env Env) (weighter.Source, error) { return s.New(*c.(*C), env) },
	}
	if s.ServerMap != nil {
		k.serverMap = func(c any) map[string]string { return s.ServerMap(*c.(*C)) }
	}
	if s.Window != nil {
		k.window = func(c any) Window { return s.Window(*c.(*C)) }
	}
	if s.FastBytes != nil {
		k.fastBytes = func(c any) (weighter.Bytes, bool) { return s.FastBytes(*c.(*C)) }
	}
	for _, f := range s.Flags {
		set, msg := f.Set, f.Message
		if msg == "" {
			msg = s.Name + ": " + f.Key + ":"
		}
		k.Flags = append(k.Flags, KindFlag{Name: f.Name, Usage: f.Usage, Key: f.Key, Bool: f.Bool, Message: msg,
			set: func(c any, v string) { set(c.(*C), v) }})
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := kinds[s.Name]; dup {
		panic(fmt.Sprintf("sourcekind: %q registered twice", s.Name))
	}
	kinds[s.Name] = k
	return k
}

// Unregister removes a kind; tests use it to undo a Register.
func Unregister(name string) {
	mu.Lock()
	defer mu.Unlock()
	delete(kinds, name)
}

// Lookup returns the kind registered under name.
func Lookup(name string) (*Kind, bool) {
	mu.RLock()
	defer mu.RUnlock()
	k, ok := kinds[name]
	return k, ok
}

// All returns the registered kinds by rank.
func All() []*Kind {
	mu.RLock()
	out := make([]*Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	mu.RUnlock()
	slices.SortFunc(out, func(a, b *Kind) int { return a.rank - b.rank })
	return out
}

// Names lists the kinds' names by rank, joined with sep ("prometheus, graphite, haproxy").
func Names(sep string) string {
	var names []string
	for _, k := range All() {
		names = append(names, k.Name)
	}
	return strings.Join(names, sep)
}

// ConfigType is the type of the kind's configuration (not a pointer to it).
func (k *Kind) ConfigType() reflect.Type { return k.configType }

// Default returns a pointer to a new configuration holding the kind's defaults.
func (k *Kind) Default() any { return k.defaults() }

// Validate checks cfg, a pointer returned by Default.
func (k *Kind) Validate(cfg any) error { return k.validate(cfg) }

// New builds the source from cfg, a pointer returned by Default.
func (k *Kind) New(cfg any, env Env) (weighter.Source, error) { return k.build(cfg, env) }

// ServerMap returns cfg's series → server names, nil if the kind has none.
func (k *Kind) ServerMap(cfg any) map[string]string {
	if k.serverMap == nil {
		return nil
	}
	return k.serverMap(cfg)
}

// Calibrates reports whether the kind is an external metric that calibrates
// the fast signal (rather than only standing in for it).
func (k *Kind) Calibrates() bool { return k.window != nil }

// Window returns the span cfg's points average over (a zero Window for a
// kind that does not calibrate).
func (k *Kind) Window(cfg any) Window {
	if k.window == nil {
		return Window{}
	}
	return k.window(cfg)
}

// FastBytes returns the bytes the fast signal weighs for cfg, and false
// when the fast signal cannot stand for what cfg measures.
func (k *Kind) FastBytes(cfg any) (weighter.Bytes, bool) {
	if k.fastBytes == nil {
		return weighter.BytesBoth, k.window != nil
	}
	return k.fastBytes(cfg)
}

// Set applies a flag's value to cfg, a pointer returned by Default.
func (f KindFlag) Set(cfg any, value string) { f.set(cfg, value) }

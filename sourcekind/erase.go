package sourcekind

import (
	"errors"
	"fmt"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Kind is a Spec with its configuration's type erased, as the registry lists
// it. Each cfg it is handed is a pointer to the kind's configuration, as New
// returns it and Accepts checks; another panics.
type Kind interface {
	Name() string
	// New returns a pointer to a configuration with the kind's defaults.
	New() any
	// Accepts reports whether cfg is a non-nil pointer to the kind's configuration.
	Accepts(cfg any) bool
	Validate(cfg any) error
	ServerMap(cfg any) map[string]string
	Window(cfg any) Window
	FastBytes(cfg any) (weighter.Bytes, bool)
	Calibrates() bool
	ReadsHAProxy() bool
	Unit(cfg any) (Unit, bool)
	// ForOneCycle returns a pointer to the configuration for one cycle, and its wait.
	ForOneCycle(cfg any) (any, time.Duration)
	Flags() []AnyFlag
	Build(cfg any, env Env) (weighter.Source, error)
}

// AnyFlag is a Flag whose configuration's type is erased: Set takes a
// pointer to the kind's configuration.
type AnyFlag struct {
	Name, Usage, Key, Message string
	Bool                      bool
	Set                       func(cfg any, value string)
}

// erase makes s a Kind. The Kind holds s by pointer, so that two sources of
// one kind compare equal (reflect.DeepEqual, which a reload uses).
func erase[C any](s Spec[C]) Kind { return &kind[C]{s} }

type kind[C any] struct{ s Spec[C] }

func (k *kind[C]) Name() string { return k.s.Name }

func (k *kind[C]) New() any {
	c := k.s.Default()
	return &c
}

func (k *kind[C]) Accepts(cfg any) bool {
	c, ok := cfg.(*C)
	return ok && c != nil
}

func (k *kind[C]) Validate(cfg any) error {
	if k.s.Validate == nil {
		return nil
	}
	return k.s.Validate(cfg.(*C))
}

func (k *kind[C]) ServerMap(cfg any) map[string]string {
	if k.s.ServerMap == nil {
		return nil
	}
	return k.s.ServerMap(cfg.(*C))
}

func (k *kind[C]) Window(cfg any) Window {
	if k.s.Window == nil {
		return Window{}
	}
	return k.s.Window(cfg.(*C))
}

func (k *kind[C]) FastBytes(cfg any) (weighter.Bytes, bool) {
	if k.s.FastBytes == nil {
		return "", false
	}
	return k.s.FastBytes(cfg.(*C))
}

func (k *kind[C]) Unit(cfg any) (Unit, bool) {
	if k.s.Unit == nil {
		return Unit{}, false
	}
	return k.s.Unit(cfg.(*C))
}

func (k *kind[C]) Calibrates() bool   { return k.s.Calibrates }
func (k *kind[C]) ReadsHAProxy() bool { return k.s.ReadsHAProxy }

func (k *kind[C]) ForOneCycle(cfg any) (any, time.Duration) {
	if k.s.ForOneCycle == nil {
		return cfg, 0
	}
	one, wait := k.s.ForOneCycle(*cfg.(*C))
	return &one, wait
}

func (k *kind[C]) Flags() []AnyFlag {
	out := make([]AnyFlag, len(k.s.Flags))
	for i, f := range k.s.Flags {
		out[i] = AnyFlag{Name: f.Name, Usage: f.Usage, Key: f.Key, Message: f.Message, Bool: f.Bool,
			Set: func(cfg any, v string) { f.Set(cfg.(*C), v) }}
	}
	return out
}

func (k *kind[C]) Build(cfg any, env Env) (weighter.Source, error) {
	return k.s.Build(*cfg.(*C), env)
}

// Configured is a source as the configuration holds it (config.Source): the
// kind's name ("" for none) and a pointer to its configuration.
type Configured interface {
	Kind() string
	Config() any
}

// Build makes the configured source; it contacts nothing.
func Build(s Configured, env Env) (weighter.Source, error) {
	if s.Kind() == "" {
		return nil, errors.New("no source configured")
	}
	k, ok := Lookup(s.Kind())
	if !ok {
		return nil, fmt.Errorf("unknown source kind %q (one of %s)", s.Kind(), Names(All()))
	}
	return k.Build(s.Config(), env)
}

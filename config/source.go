package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/sourcekind"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Source is a backend's load source: exactly one kind of package sourcekind
// is set (source: {prometheus: {…}}). Everything about a kind is in its own
// file there; nothing here names one. A Source is decoded and validated
// here and built by its users (sourcekind.Build).
type Source struct {
	// set holds the kinds written, in the registry's order, each with its
	// configuration; a valid source has exactly one.
	set []kindConfig
}

// kindConfig is one kind of a source and a pointer to its configuration.
type kindConfig struct {
	kind sourcekind.Kind
	cfg  any
}

// Window is the span an external metric's points average over, for the
// calibration (sourcekind.Window).
type Window = sourcekind.Window

// UnmarshalYAML decodes `source:` over the defaults of the kinds written:
// the keys written (merged ones too) are read first, as nodes, to know which
// kinds get their defaults; then the decoder's strictness (unknown keys),
// aliases and merge keys apply as to any other struct: a struct with one
// field per kind, under its name. Validation comes after, with the rest of
// the configuration.
func (s *Source) UnmarshalYAML(unmarshal func(any) error) error {
	var written map[string]yaml.Node
	if err := unmarshal(&written); err != nil {
		return err
	}
	kinds := sourcekind.All()
	p := reflect.New(kindsStruct(kinds))
	for i, k := range kinds {
		if _, ok := written[k.Name()]; ok {
			p.Elem().Field(i).Set(reflect.ValueOf(k.New()))
		}
	}
	if err := unmarshal(p.Interface()); err != nil {
		return err
	}
	*s = Source{}
	for i, k := range kinds {
		if f := p.Elem().Field(i); !f.IsNil() {
			s.set = append(s.set, kindConfig{k, f.Interface()})
		}
	}
	return nil
}

// kindsStruct is the struct `source:` decodes into: one field per kind, a
// pointer to its configuration under its name. A struct, made from the
// registry, because yaml.v3 refuses an unknown key only in a struct decoded
// through unmarshal (Node.Decode drops the decoder's strictness), and a
// struct's fields are what its messages and merge keys already work with.
func kindsStruct(kinds []sourcekind.Kind) reflect.Type {
	fields := make([]reflect.StructField, len(kinds))
	for i, k := range kinds {
		fields[i] = reflect.StructField{Name: "Kind" + strconv.Itoa(i), Type: reflect.TypeOf(k.New()),
			Tag: reflect.StructTag(`yaml:"` + k.Name() + `"`)}
	}
	return reflect.StructOf(fields)
}

// NewSource returns a source of the named kind with cfg, a pointer to that
// kind's configuration (*sources.PrometheusConfig, *haproxy.StatsConfig, ...).
func NewSource(kind string, cfg any) (Source, error) {
	k, ok := sourcekind.Lookup(kind)
	if !ok {
		return Source{}, fmt.Errorf("unknown source kind %q (one of %s)", kind, kindNames())
	}
	if !k.Accepts(cfg) {
		return Source{}, fmt.Errorf("source %s cannot take a %T", kind, cfg)
	}
	return Source{set: []kindConfig{{k, cfg}}}, nil
}

// kindNames lists the kinds for messages: "prometheus, graphite, haproxy".
func kindNames() string { return sourcekind.Names(sourcekind.All()) }

// calibratingKinds lists the kinds that calibrate the fast signal, for messages.
func calibratingKinds() string {
	return sourcekind.Names(slices.DeleteFunc(sourcekind.All(), func(k sourcekind.Kind) bool { return !k.Calibrates() }))
}

// only returns the configured kind and its configuration, or nil.
func (s Source) only() (sourcekind.Kind, any) {
	if len(s.set) == 0 {
		return nil, nil
	}
	return s.set[0].kind, s.set[0].cfg
}

// Kind is the configured kind's key under source:, or "" if none.
func (s Source) Kind() string {
	if k, _ := s.only(); k != nil {
		return k.Name()
	}
	return ""
}

// Config is a pointer to the configured kind's configuration, or nil.
func (s Source) Config() any {
	_, cfg := s.only()
	return cfg
}

// NeedsHAProxy reports whether the source reads HAProxy's statistics through
// the runtime socket: it cannot feed an IPVS service, and validate cannot
// build it (there is no socket to read through).
func (s Source) NeedsHAProxy() bool {
	k, _ := s.only()
	return k != nil && k.ReadsHAProxy()
}

// ForOneCycle returns the source set up for a single cycle (`once`), leaving
// s as it is, and how long that cycle's first fetch waits (HAProxy's
// statistics are read twice a rate window apart).
func (s Source) ForOneCycle() (Source, time.Duration) {
	k, cfg := s.only()
	if k == nil {
		return s, 0
	}
	one, wait := k.ForOneCycle(cfg)
	s.set = slices.Clone(s.set)
	s.set[0].cfg = one
	return s, wait
}

// configOf returns the configuration of kind k, set with its defaults when
// the source has none yet (flags set a source key by key).
func (s *Source) configOf(k sourcekind.Kind) any {
	for _, kc := range s.set {
		if kc.kind == k {
			return kc.cfg
		}
	}
	cfg := k.New()
	s.set = append(s.set, kindConfig{k, cfg})
	return cfg
}

// serverMap returns the configuration's series → server names, nil for a kind without one.
func (s Source) serverMap() map[string]string {
	if k, cfg := s.only(); k != nil {
		return k.ServerMap(cfg)
	}
	return nil
}

// Unit is the unit of the source's loads when its configuration says it
// (HAProxy's counters), for the status page.
func (s Source) Unit() (sourcekind.Unit, bool) {
	if k, cfg := s.only(); k != nil {
		return k.Unit(cfg)
	}
	return sourcekind.Unit{}, false
}

// calibrates reports whether the source is an external metric that
// calibrates HAProxy's fast signal, rather than only standing in for it (as
// HAProxy's own statistics do).
func (s Source) calibrates() bool {
	k, _ := s.only()
	return k != nil && k.Calibrates()
}

// window is the span the source's points average over (a zero Window when
// the configuration does not say it).
func (s Source) window() Window {
	if k, cfg := s.only(); k != nil {
		return k.Window(cfg)
	}
	return Window{}
}

// fastBytes says which bytes the fast signal weighs for this source, or
// false when the fast signal cannot stand for what it measures (a session
// count): the source is then used as it is.
func (s Source) fastBytes() (weighter.Bytes, bool) {
	if k, cfg := s.only(); k != nil {
		return k.FastBytes(cfg)
	}
	return "", false
}

// validate checks the source of a backend, and its server_map for an HAProxy
// backend; its problems are at paths under "source".
func (s Source) validate(haproxyNames bool) []*FieldError {
	switch n := len(s.set); {
	case n == 0:
		return keyed(fmt.Errorf("source: missing (one of %s)", kindNames()), "source")
	case n > 1:
		return keyed(fmt.Errorf("source: more than one of %s", kindNames()), "source")
	}
	var problems []*FieldError
	k, cfg := s.only()
	// Each of the kind's messages starts with its name and the key it is
	// about ("prometheus: query: must be set").
	if err := k.Validate(cfg); err != nil {
		problems = append(problems, keyed(fmt.Errorf("source: %w", err), "source", s.Kind())...)
	}
	if haproxyNames {
		problems = append(problems, s.validateServerMap()...)
	}
	return problems
}

// validateServerMap refuses server_map targets that HAProxy's runtime socket
// cannot carry as server names: each would fail every write to the backend.
func (s Source) validateServerMap() []*FieldError {
	table := s.serverMap()
	var problems []*FieldError
	for _, k := range slices.Sorted(maps.Keys(table)) {
		if table[k] == "" {
			continue // the source's own check says it maps to an empty name
		}
		if err := haproxy.ValidName(table[k]); err != nil {
			problems = append(problems, keyed(fmt.Errorf("source: %s: server_map: %s: server name: %w", s.Kind(), k, err),
				"source", s.Kind(), "server_map", k)...)
		}
	}
	return problems
}

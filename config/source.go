package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/sourcekind"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Source is a backend's load source: one of the kinds sourcekind registers,
// written as the kind's key and its configuration (source: {prometheus: {…}}).
type Source struct {
	kind *sourcekind.Kind
	cfg  any // a pointer to the kind's configuration
	// more counts further kinds written beside the first, which Validate refuses.
	more int
}

// NewSource returns a source of the named kind with cfg, a pointer to its
// configuration (as the kind's Default returns it).
func NewSource(kind string, cfg any) (Source, error) {
	k, ok := sourcekind.Lookup(kind)
	if !ok {
		return Source{}, fmt.Errorf("unknown source kind %q (one of %s)", kind, sourcekind.Names(", "))
	}
	if reflect.TypeOf(cfg) != reflect.PointerTo(k.ConfigType()) {
		return Source{}, fmt.Errorf("source %s takes a *%s, not a %T", kind, k.ConfigType(), cfg)
	}
	return newSource(k, cfg), nil
}

func newSource(k *sourcekind.Kind, cfg any) Source {
	return Source{kind: k, cfg: cfg}
}

// Kind is the configured kind's key under source:, or "" if none.
func (s Source) Kind() string {
	if s.kind == nil {
		return ""
	}
	return s.kind.Name
}

// Config is a pointer to the kind's configuration (its Spec's type), or nil.
func (s Source) Config() any {
	return s.cfg
}

// NeedsHAProxy reports whether the source reads HAProxy's statistics through the runtime socket.
func (s Source) NeedsHAProxy() bool { return s.kind != nil && s.kind.ReadsHAProxy }

// Build makes the source; it contacts nothing.
func (s Source) Build(env sourcekind.Env) (weighter.Source, error) {
	if s.kind == nil {
		return nil, errors.New("no source configured")
	}
	return s.kind.New(s.Config(), env)
}

// UnmarshalYAML decodes the one key of `source:` into its kind's
// configuration, over the kind's defaults. It decodes through a struct made
// from the registry, one field per kind, so that the decoder's strictness
// (unknown keys), aliases and merge keys apply as to any other struct. The
// keys written (merged ones too) are read first, as nodes, to know the kinds
// that get their defaults.
func (s *Source) UnmarshalYAML(unmarshal func(any) error) error {
	var written map[string]yaml.Node
	if err := unmarshal(&written); err != nil {
		return err
	}
	all := sourcekind.All()
	fields := make([]reflect.StructField, len(all))
	for i, k := range all {
		fields[i] = reflect.StructField{Name: fmt.Sprintf("K%d", i), Type: reflect.PointerTo(k.ConfigType()),
			Tag: reflect.StructTag(fmt.Sprintf("yaml:%q", k.Name))}
	}
	shape := reflect.New(reflect.StructOf(fields)).Elem()
	// A field set before decoding keeps its pointer, so the kinds written get
	// their defaults; the others stay nil.
	for i, k := range all {
		if _, ok := written[k.Name]; ok {
			shape.Field(i).Set(reflect.ValueOf(k.Default()))
		}
	}
	if err := unmarshal(shape.Addr().Interface()); err != nil {
		return err
	}
	*s = Source{}
	for i, k := range all {
		if f := shape.Field(i); !f.IsNil() {
			if s.kind == nil {
				*s = newSource(k, f.Interface())
			} else {
				s.more++
			}
		}
	}
	return nil
}

// validate checks the source of a backend, and its server_map for an HAProxy
// backend; its problems are at paths under "source".
func (s Source) validate(haproxyNames bool) []*FieldError {
	names := sourcekind.Names(", ")
	switch {
	case s.kind == nil:
		return keyed(fmt.Errorf("source: missing (one of %s)", names), "source")
	case s.more > 0:
		return keyed(fmt.Errorf("source: more than one of %s", names), "source")
	}
	var problems []*FieldError
	if err := s.kind.Validate(s.Config()); err != nil {
		problems = append(problems, keyed(fmt.Errorf("source: %w", err), "source", s.kind.Name)...)
	}
	if haproxyNames {
		problems = append(problems, s.validateServerMap()...)
	}
	return problems
}

// validateServerMap refuses server_map targets that HAProxy's runtime socket
// cannot carry as server names: each would fail every write to the backend.
func (s Source) validateServerMap() []*FieldError {
	table := s.kind.ServerMap(s.Config())
	var problems []*FieldError
	for _, k := range slices.Sorted(maps.Keys(table)) {
		if table[k] == "" {
			continue // the source's own check says it maps to an empty name
		}
		if err := haproxy.ValidName(table[k]); err != nil {
			problems = append(problems, keyed(fmt.Errorf("source: %s: server_map: %s: server name %q: %w", s.kind.Name, k, table[k], err),
				"source", s.kind.Name, "server_map", k)...)
		}
	}
	return problems
}

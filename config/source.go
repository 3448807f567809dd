package config

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The source kinds, the keys under `source:`, in the README's order.
const (
	KindPrometheus = "prometheus"
	KindGraphite   = "graphite"
	KindHAProxy    = "haproxy"
)

// kindNames is the list of kinds in messages ("prometheus, graphite, haproxy").
const kindNames = KindPrometheus + ", " + KindGraphite + ", " + KindHAProxy

// Source is a backend's load source: exactly one of its kinds is set
// (source: {prometheus: {…}}). A new kind is a field here and a case in each
// switch below.
type Source struct {
	Prometheus *sources.PrometheusConfig `yaml:"prometheus"`
	Graphite   *sources.GraphiteConfig   `yaml:"graphite"`
	HAProxy    *haproxy.StatsConfig      `yaml:"haproxy"`
}

// UnmarshalYAML decodes `source:` over the defaults of the kinds written:
// the keys written (merged ones too) are read first, as nodes, to know which
// kinds get their defaults; then the decoder's strictness (unknown keys),
// aliases and merge keys apply as to any other struct. Validation comes
// after, with the rest of the configuration.
func (s *Source) UnmarshalYAML(unmarshal func(any) error) error {
	var written map[string]yaml.Node
	if err := unmarshal(&written); err != nil {
		return err
	}
	type plain Source // without this method, so that decoding does not recurse
	var p plain
	if _, ok := written[KindPrometheus]; ok {
		c := sources.DefaultPrometheusConfig()
		p.Prometheus = &c
	}
	if _, ok := written[KindGraphite]; ok {
		c := sources.DefaultGraphiteConfig()
		p.Graphite = &c
	}
	if _, ok := written[KindHAProxy]; ok {
		p.HAProxy = &haproxy.StatsConfig{}
	}
	if err := unmarshal(&p); err != nil {
		return err
	}
	*s = Source(p)
	return nil
}

// NewSource returns a source of the named kind with cfg, a pointer to that
// kind's configuration (*sources.PrometheusConfig, *sources.GraphiteConfig,
// *haproxy.StatsConfig).
func NewSource(kind string, cfg any) (Source, error) {
	var s Source
	ok := false
	switch kind {
	case KindPrometheus:
		s.Prometheus, ok = cfg.(*sources.PrometheusConfig)
	case KindGraphite:
		s.Graphite, ok = cfg.(*sources.GraphiteConfig)
	case KindHAProxy:
		s.HAProxy, ok = cfg.(*haproxy.StatsConfig)
	default:
		return Source{}, fmt.Errorf("unknown source kind %q (one of %s)", kind, kindNames)
	}
	if !ok || s.Config() == nil {
		return Source{}, fmt.Errorf("source %s cannot take a %T", kind, cfg)
	}
	return s, nil
}

// kinds returns the kinds set, in order.
func (s Source) kinds() []string {
	var out []string
	if s.Prometheus != nil {
		out = append(out, KindPrometheus)
	}
	if s.Graphite != nil {
		out = append(out, KindGraphite)
	}
	if s.HAProxy != nil {
		out = append(out, KindHAProxy)
	}
	return out
}

// Kind is the configured kind's key under source:, or "" if none.
func (s Source) Kind() string {
	if k := s.kinds(); len(k) > 0 {
		return k[0]
	}
	return ""
}

// Config is a pointer to the configured kind's configuration, or nil.
func (s Source) Config() any {
	switch {
	case s.Prometheus != nil:
		return s.Prometheus
	case s.Graphite != nil:
		return s.Graphite
	case s.HAProxy != nil:
		return s.HAProxy
	}
	return nil
}

// NeedsHAProxy reports whether the source reads HAProxy's statistics through
// the runtime socket: it cannot feed an IPVS service, and validate cannot
// build it (there is no socket to read through).
func (s Source) NeedsHAProxy() bool { return s.Kind() == KindHAProxy }

// ForOneCycle returns the source set up for a single cycle (`once`), leaving
// s as it is, and how long that cycle's first fetch waits: HAProxy's
// statistics, which a running daemon holds until its reads span a rate
// window, are read twice that far apart instead.
func (s Source) ForOneCycle() (Source, time.Duration) {
	if s.HAProxy == nil {
		return s, 0
	}
	one, wait := s.HAProxy.ForOneCycle()
	s.HAProxy = &one
	return s, wait
}

// SourceEnv is what building a source may need besides its configuration.
type SourceEnv struct {
	// Backend is the name of the backend the source feeds.
	Backend string
	// Stats reads the backend's HAProxy statistics; nil for an IPVS service
	// and in validate, which contacts nothing.
	Stats haproxy.StatsReader
	// Log may be nil.
	Log *slog.Logger
}

// Build makes the source; it contacts nothing.
func (s Source) Build(env SourceEnv) (weighter.Source, error) {
	switch s.Kind() {
	case KindPrometheus:
		return sources.NewPrometheus(*s.Prometheus, env.Log)
	case KindGraphite:
		return sources.NewGraphite(*s.Graphite, env.Log)
	case KindHAProxy:
		if env.Stats == nil {
			return nil, errors.New("source haproxy: HAProxy statistics need an HAProxy backend")
		}
		return haproxy.NewStatsSource(*s.HAProxy, env.Backend, env.Stats, env.Log)
	}
	return nil, errors.New("no source configured")
}

// validateKind checks the configured kind's own keys; each message starts
// with the kind's name and the key it is about ("prometheus: query: must be set").
func (s Source) validateKind() error {
	switch s.Kind() {
	case KindPrometheus:
		return s.Prometheus.Validate()
	case KindGraphite:
		return s.Graphite.Validate()
	case KindHAProxy:
		return s.HAProxy.Validate()
	}
	return nil
}

// serverMap returns the configuration's series → server names, nil for a kind without one.
func (s Source) serverMap() map[string]string {
	switch s.Kind() {
	case KindPrometheus:
		return s.Prometheus.ServerMap
	case KindGraphite:
		return s.Graphite.ServerMap
	}
	return nil
}

// Window is the span an external metric's points average over, for the
// calibration (docs/research/fresh-by-default.md: the local load is averaged over the
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

// calibrates reports whether the source is an external metric that
// calibrates HAProxy's fast signal, rather than only standing in for it (as
// HAProxy's own statistics do).
func (s Source) calibrates() bool {
	k := s.Kind()
	return k == KindPrometheus || k == KindGraphite
}

// window is the span the source's points average over (a zero Window for a
// source that does not calibrate).
func (s Source) window() Window {
	switch s.Kind() {
	case KindPrometheus:
		// A point of rate(x[1m]) averages the last minute: the largest range
		// in the query is the span of its value.
		if d, ok := sources.PromQLWindow(s.Prometheus.Query); ok {
			return Window{Span: d, How: "the query's range [" + model.Duration(d).String() + "]"}
		}
	case KindGraphite:
		// A Graphite point is its bucket's aggregate, stamped at the bucket's start.
		return Window{FromStep: true, How: "the series' step"}
	}
	return Window{}
}

// fastBytes says which bytes the fast signal weighs for this source, or
// false when the fast signal cannot stand for what it measures (a session
// count): the source is then used as it is.
func (s Source) fastBytes() (weighter.Bytes, bool) {
	switch s.Kind() {
	case KindPrometheus, KindGraphite:
		return weighter.BytesBoth, true
	case KindHAProxy:
		// HAProxy's byte counters are what the fast signal reads live; a
		// session count is another load, which it cannot stand for.
		switch s.HAProxy.Counter {
		case haproxy.CounterBytesIn:
			return weighter.BytesIn, true
		case haproxy.CounterBytesOut:
			return weighter.BytesOut, true
		}
	}
	return "", false
}

// validate checks the source of a backend, and its server_map for an HAProxy
// backend; its problems are at paths under "source".
func (s Source) validate(haproxyNames bool) []*FieldError {
	switch n := len(s.kinds()); {
	case n == 0:
		return keyed(fmt.Errorf("source: missing (one of %s)", kindNames), "source")
	case n > 1:
		return keyed(fmt.Errorf("source: more than one of %s", kindNames), "source")
	}
	var problems []*FieldError
	if err := s.validateKind(); err != nil {
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

package config

import (
	"strings"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
)

// SourceFlag is a command-line flag of run and once that sets one key of a
// source kind, for a backend given by flags (FromFlags).
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

// sourceFlags lists every source flag, the first of each kind first: that
// one names the kind in "give --prometheus-url, --graphite-url or --haproxy-counter".
var sourceFlags = []SourceFlag{
	{Kind: KindPrometheus, Name: "prometheus-url", Key: "url", Usage: "Prometheus base URL (load source)",
		set: func(s *Source, v string) { s.prometheus().URL = v }},
	{Kind: KindPrometheus, Name: "query", Key: "query", Usage: "PromQL query returning one series per server",
		set: func(s *Source, v string) { s.prometheus().Query = v }},
	{Kind: KindPrometheus, Name: "server-label", Key: "server_label", Usage: "label naming the server in the query result (default server)",
		set: func(s *Source, v string) { s.prometheus().ServerLabel = v }},
	{Kind: KindGraphite, Name: "graphite-url", Key: "url", Usage: "Graphite base URL (load source)",
		set: func(s *Source, v string) { s.graphite().URL = v }},
	{Kind: KindGraphite, Name: "target", Key: "target", Usage: "Graphite render target returning one series per server",
		set: func(s *Source, v string) { s.graphite().Target = v }},
	{Kind: KindHAProxy, Name: "haproxy-counter", Key: "counter", Message: "haproxy source:",
		Usage: "use HAProxy's own statistics as load: bytes_in, bytes_out, sessions_total, current_sessions",
		set:   func(s *Source, v string) { s.haproxyStats().Counter = v }},
	{Kind: KindHAProxy, Name: "per-connection", Key: "per_connection", Message: "haproxy source: per_connection", Bool: true,
		Usage: "with --haproxy-counter (a rate): divide each server's rate by its open sessions",
		set:   func(s *Source, v string) { s.haproxyStats().PerConnection = v == "true" }},
}

// SourceFlags returns every source flag, the first of each kind first.
func SourceFlags() []SourceFlag {
	out := make([]SourceFlag, len(sourceFlags))
	copy(out, sourceFlags)
	return out
}

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
	for _, f := range sourceFlags {
		if len(out) == 0 || out[len(out)-1].Kind != f.Kind {
			out = append(out, f)
		}
	}
	return out
}

// The kinds' configurations as a flag finds them: set with their defaults
// when it is the kind's first flag given.

func (s *Source) prometheus() *sources.PrometheusConfig {
	if s.Prometheus == nil {
		c := sources.DefaultPrometheusConfig()
		s.Prometheus = &c
	}
	return s.Prometheus
}

func (s *Source) graphite() *sources.GraphiteConfig {
	if s.Graphite == nil {
		c := sources.DefaultGraphiteConfig()
		s.Graphite = &c
	}
	return s.Graphite
}

func (s *Source) haproxyStats() *haproxy.StatsConfig {
	if s.HAProxy == nil {
		s.HAProxy = &haproxy.StatsConfig{}
	}
	return s.HAProxy
}

package config

import (
	"errors"
	"time"

	"gopkg.in/yaml.v3"
)

// Flags describe a single backend on the command line, without a file.
// Empty strings and nil pointers mean "not given".
type Flags struct {
	Socket         string
	Backend        string
	PrometheusURL  string
	Query          string
	ServerLabel    string
	GraphiteURL    string
	Target         string
	HAProxyCounter string
	PerConnection  bool
	Function       string
	LimitingFactor *float64
	Aggressiveness *float64
	Interval       time.Duration
	Listen         *string
}

// FromFlags builds a one-backend configuration from flags. It goes through the
// same decoder and validation as a file, so both say the same things.
func FromFlags(f Flags) (*Config, error) {
	if f.Backend == "" {
		return nil, errors.New("--backend is required without --config")
	}
	doc := map[string]any{}
	if f.Socket != "" {
		doc["haproxy"] = map[string]any{"socket": f.Socket}
	}
	if f.Interval != 0 {
		doc["interval"] = f.Interval.String()
	}
	if f.Listen != nil {
		doc["listen"] = *f.Listen
	}
	b := map[string]any{"name": f.Backend, "source": f.source()}
	setIf(b, "function", f.Function)
	if f.LimitingFactor != nil {
		b["limiting_factor"] = *f.LimitingFactor
	}
	if f.Aggressiveness != nil {
		b["aggressiveness"] = *f.Aggressiveness
	}
	doc["backends"] = []any{b}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	// No environment expansion: a ${...} in a flag (a Graphite template, a
	// PromQL named group) is meant literally, and the shell has expanded the rest.
	return Parse("flags", data, nil)
}

// source picks the source from whichever source flags were given; several is
// left to validation ("more than one").
func (f Flags) source() map[string]any {
	src := map[string]any{}
	if f.PrometheusURL != "" || f.Query != "" || f.ServerLabel != "" {
		p := map[string]any{}
		setIf(p, "url", f.PrometheusURL)
		setIf(p, "query", f.Query)
		setIf(p, "server_label", f.ServerLabel)
		src["prometheus"] = p
	}
	if f.GraphiteURL != "" || f.Target != "" {
		g := map[string]any{}
		setIf(g, "url", f.GraphiteURL)
		setIf(g, "target", f.Target)
		src["graphite"] = g
	}
	if f.HAProxyCounter != "" || f.PerConnection {
		h := map[string]any{}
		setIf(h, "counter", f.HAProxyCounter)
		if f.PerConnection {
			h["per_connection"] = true
		}
		src["haproxy"] = h
	}
	return src
}

func setIf(m map[string]any, key, v string) {
	if v != "" {
		m[key] = v
	}
}

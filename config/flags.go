package config

import (
	"errors"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/internal/errs"
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
	cfg, err := parse(data, nil)
	if err != nil {
		return nil, FlagsError(err)
	}
	return cfg, nil
}

// flagNames maps the start of a validation message about a key of the
// configuration FromFlags builds to the flag that set the key. Messages
// keep their own form: "limiting_factor must be" becomes "--limiting-factor
// must be", "interval: must be" becomes "--interval: must be".
var flagNames = []struct{ key, flag string }{
	{"source: missing (one of prometheus, graphite, haproxy)", "no load source: give --prometheus-url, --graphite-url or --haproxy-counter"},
	{"source: more than one of prometheus, graphite, haproxy", "more than one load source: give one of --prometheus-url, --graphite-url or --haproxy-counter"},
	{"source: prometheus: url:", "--prometheus-url:"},
	{"source: prometheus: query:", "--query:"},
	{"source: prometheus: server_label:", "--server-label:"},
	{"source: graphite: url:", "--graphite-url:"},
	{"source: graphite: target:", "--target:"},
	{"source: haproxy source: per_connection", "--per-connection"},
	{"source: haproxy source:", "--haproxy-counter:"},
	{"haproxy: socket", "--socket"},
	{"interval:", "--interval:"},
	{"listen:", "--listen:"},
	{"name:", "--backend:"},
	{"function ", "--function "},
	{"limiting_factor ", "--limiting-factor "},
	{"aggressiveness ", "--aggressiveness "},
}

// FlagsError rewrites the validation problems of a configuration that
// flags made (FromFlags, or --interval and --listen over a file) in terms
// of the flags: a "flags:9:" line of YAML the user never wrote, or a
// "backends[0] (b):" position, would only puzzle. One line per problem.
func FlagsError(err error) error {
	var out []error
	for _, leaf := range errs.Leaves(err) {
		// A source joins its problems under one prefix ("source: prometheus:
		// url: …\nquery: …"): each line gets the prefix back before mapping.
		lines := strings.Split(leaf.Error(), "\n")
		if m := backendMsg.FindStringSubmatch(lines[0]); m != nil {
			lines[0] = m[2]
		}
		prefix := ""
		for _, p := range []string{"source: prometheus: ", "source: graphite: "} {
			if strings.HasPrefix(lines[0], p) {
				prefix = p
			}
		}
		for i, line := range lines {
			if i > 0 {
				line = prefix + line
			}
			out = append(out, errors.New(flagMessage(line)))
		}
	}
	return errors.Join(out...)
}

func flagMessage(msg string) string {
	for _, n := range flagNames {
		if strings.HasPrefix(msg, n.key) {
			return n.flag + strings.TrimPrefix(msg, n.key)
		}
	}
	return msg
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

// Package config loads and validates the haproxy-weighter YAML configuration.
//
// Loading is strict: unknown keys, bad durations and missing backend fields are
// errors that name the file and, where yaml.v3 knows it, the line. Every backend
// inlines a weighter.Policy, so policy keys sit directly on the backend and take
// their defaults from weighter.DefaultPolicy().
package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/errs"
	"github.com/haproxy-weighter/haproxy-weighter/lvs"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Default values of the top-level keys.
const (
	DefaultInterval = 10 * time.Second
	DefaultJitter   = 0.1
	// MinInterval is the shortest interval accepted.
	MinInterval   = 100 * time.Millisecond
	DefaultListen = "127.0.0.1:9842"
	DefaultSocket = "/run/haproxy/admin.sock"
)

// Config is the whole configuration file.
type Config struct {
	// Interval between two cycles of one backend.
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds one cycle (fetch, plan, write); 0 means Interval.
	Timeout time.Duration `yaml:"timeout"`
	// Jitter spreads cycles by ±Jitter×Interval so balancers do not act in lockstep.
	Jitter float64 `yaml:"jitter"`
	// Listen is the address of /metrics, /healthz and /readyz; empty disables them.
	Listen string `yaml:"listen"`
	// RestoreOnExit writes back, on shutdown, the weights read at start.
	RestoreOnExit bool `yaml:"restore_on_exit"`
	// HAProxy is the runtime socket shared by every HAProxy backend.
	HAProxy haproxy.Config `yaml:"haproxy"`
	// Backends are weighted independently of each other.
	Backends []Backend `yaml:"backends"`
}

// Backend is one HAProxy backend (or IPVS service) and where its load comes from.
type Backend struct {
	// Name is the HAProxy backend name (or a label for an IPVS service).
	Name string `yaml:"name"`
	// Source says where the servers' load is read.
	Source Source `yaml:"source"`
	// IPVS, when set, makes this backend an IPVS virtual service instead of an HAProxy backend.
	IPVS *lvs.Config `yaml:"ipvs"`
	// Policy holds the weighting function and the guards around it.
	weighter.Policy `yaml:",inline"`

	line int // where the backend starts in the file, for messages
}

// Source selects exactly one load source.
type Source struct {
	Prometheus *sources.PrometheusConfig `yaml:"prometheus"`
	Graphite   *sources.GraphiteConfig   `yaml:"graphite"`
	HAProxy    *haproxy.StatsConfig      `yaml:"haproxy"`
}

// Kind names the configured source ("prometheus", "graphite", "haproxy"), or "" if none.
func (s Source) Kind() string {
	switch {
	case s.Prometheus != nil:
		return "prometheus"
	case s.Graphite != nil:
		return "graphite"
	case s.HAProxy != nil:
		return "haproxy"
	}
	return ""
}

func (s Source) count() int {
	n := 0
	for _, set := range []bool{s.Prometheus != nil, s.Graphite != nil, s.HAProxy != nil} {
		if set {
			n++
		}
	}
	return n
}

// Default returns a configuration with every top-level default and no backends.
func Default() Config {
	return Config{
		Interval: DefaultInterval,
		Jitter:   DefaultJitter,
		Listen:   DefaultListen,
		HAProxy:  haproxy.Config{Socket: DefaultSocket},
	}
}

// CycleTimeout is the timeout of one cycle: Timeout, or Interval when unset.
func (c *Config) CycleTimeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return c.Interval
}

// Validate checks the values that decoding alone cannot.
func (c *Config) Validate() error {
	var problems []error
	if c.Interval < MinInterval {
		// 1ms is a typo for 1m far more often than a wish: it would cycle
		// back to back against HAProxy and the metrics source.
		problems = append(problems, fmt.Errorf("interval: must be at least %s, got %s", MinInterval, c.Interval))
	}
	if c.Timeout < 0 {
		problems = append(problems, fmt.Errorf("timeout: must not be negative, got %s", c.Timeout))
	}
	if !(c.Jitter >= 0 && c.Jitter < 1) { // written so that NaN fails too
		problems = append(problems, fmt.Errorf("jitter: must be in [0, 1), got %g", c.Jitter))
	}
	if err := checkListen(c.Listen); err != nil {
		problems = append(problems, err)
	}
	if len(c.Backends) == 0 {
		problems = append(problems, errors.New("backends: at least one backend is required"))
	}
	if c.usesHAProxy() {
		if err := c.HAProxy.Validate(); err != nil {
			problems = append(problems, err)
		}
	}
	seen := map[string]bool{}
	for i := range c.Backends {
		b := &c.Backends[i]
		if err := b.Validate(); err != nil {
			problems = append(problems, b.wrap(i, err))
		}
		if b.Name != "" && seen[b.Name] {
			problems = append(problems, b.wrap(i, fmt.Errorf("name: duplicate backend %q", b.Name)))
		}
		seen[b.Name] = true
	}
	return errors.Join(problems...)
}

// checkListen rejects what net.Listen would, so that validate (and a reload)
// says it rather than the daemon failing at start. The host is not resolved.
func checkListen(addr string) error {
	if addr == "" {
		return nil // disabled
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen: %q is not host:port (%v)", addr, err)
	}
	if port == "" {
		return nil // any free port, as net.Listen takes it
	}
	// A number in range, or a name from /etc/services: a local lookup, no DNS.
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("listen: %q is not host:port (bad port %q)", addr, port)
	}
	return nil
}

// usesHAProxy reports whether any backend needs the HAProxy socket.
func (c *Config) usesHAProxy() bool {
	for _, b := range c.Backends {
		if b.IPVS == nil || b.Source.HAProxy != nil {
			return true
		}
	}
	return false
}

// Validate checks one backend: name, exactly one source, the policy.
func (b *Backend) Validate() error {
	var problems []error
	if b.Name == "" {
		problems = append(problems, errors.New("name: missing"))
	} else if b.IPVS == nil {
		// Sent on the runtime socket in every command: a space or ';' would
		// split the command, and run would fail (or worse) at every cycle.
		if err := haproxy.ValidName(b.Name); err != nil {
			problems = append(problems, fmt.Errorf("name: %w", err))
		}
	}
	switch b.Source.count() {
	case 0:
		problems = append(problems, errors.New("source: missing (one of prometheus, graphite, haproxy)"))
	case 1:
		if err := b.validateSource(); err != nil {
			problems = append(problems, fmt.Errorf("source: %w", err))
		}
		if b.IPVS == nil {
			problems = append(problems, b.validateServerMap()...)
		}
	default:
		problems = append(problems, errors.New("source: more than one of prometheus, graphite, haproxy"))
	}
	if b.IPVS != nil {
		if err := b.IPVS.Validate(); err != nil {
			problems = append(problems, err)
		}
		if b.Source.HAProxy != nil {
			problems = append(problems, errors.New("source.haproxy: HAProxy statistics cannot feed an IPVS service"))
		}
	}
	if err := b.Policy.Validate(); err != nil {
		problems = append(problems, err)
	}
	return errors.Join(problems...)
}

func (b *Backend) validateSource() error {
	switch {
	case b.Source.Prometheus != nil:
		return b.Source.Prometheus.Validate()
	case b.Source.Graphite != nil:
		return b.Source.Graphite.Validate()
	default:
		return b.Source.HAProxy.Validate()
	}
}

// validateServerMap refuses server_map targets that HAProxy's runtime socket
// cannot carry as server names: each would fail every write to the backend.
func (b *Backend) validateServerMap() []error {
	var kind string
	var table map[string]string
	switch {
	case b.Source.Prometheus != nil:
		kind, table = "prometheus", b.Source.Prometheus.ServerMap
	case b.Source.Graphite != nil:
		kind, table = "graphite", b.Source.Graphite.ServerMap
	}
	var problems []error
	for _, k := range slices.Sorted(maps.Keys(table)) {
		if table[k] == "" {
			continue // the source's own check says it maps to an empty name
		}
		if err := haproxy.ValidName(table[k]); err != nil {
			problems = append(problems, fmt.Errorf("source: %s: server_map: %s: server name %q: %w", kind, k, table[k], err))
		}
	}
	return problems
}

// wrap prefixes err with the backend's position, so each joined message says where.
// A name HAProxy could not take is quoted: it may hold a line break, which
// would split the one line each problem gets.
func (b *Backend) wrap(i int, err error) error {
	label := fmt.Sprintf("backends[%d]", i)
	switch {
	case b.Name != "" && haproxy.ValidName(b.Name) != nil:
		label = fmt.Sprintf("backends[%d] (%q)", i, b.Name)
	case b.Name != "":
		label = fmt.Sprintf("backends[%d] (%s)", i, b.Name)
	}
	var msgs []error
	for _, e := range errs.Leaves(err) {
		msgs = append(msgs, &lineError{line: b.line, err: fmt.Errorf("%s: %w", label, e)})
	}
	return errors.Join(msgs...)
}

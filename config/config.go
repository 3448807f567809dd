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
	"net"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/lvs"
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
	Interval duration.Duration `yaml:"interval"`
	// Timeout bounds one cycle (fetch, plan, write); 0 means Interval.
	Timeout duration.Duration `yaml:"timeout"`
	// Jitter spreads cycles by ±Jitter×Interval so balancers do not act in lockstep.
	Jitter float64 `yaml:"jitter"`
	// Listen is the address of /metrics, /healthz and /readyz; empty disables them.
	Listen string `yaml:"listen"`
	// WebConfigFile is exporter-toolkit's web configuration (TLS, basic
	// auth) of the listener; empty serves plain HTTP. Relative to the file.
	WebConfigFile string `yaml:"web_config_file"`
	// Peers are the listen URLs of the daemons on the other balancers in
	// front of the same servers, whose fast readings this one adds to its own.
	Peers []string `yaml:"peers"`
	// PeerClient is how the peers are asked: credentials, CA (peerclient.go).
	PeerClient PeerClient `yaml:"peer_client"`
	// RestoreOnExit writes back, on shutdown, the weights read at start.
	RestoreOnExit bool `yaml:"restore_on_exit"`
	// HAProxy is the runtime socket shared by every HAProxy backend.
	HAProxy haproxy.Config `yaml:"haproxy"`
	// Backends are weighted independently of each other.
	Backends []Backend `yaml:"backends"`

	// Warnings are what loading found that does not stop it (deprecated
	// keys), one "file:line: warning: message" each: run logs them at each
	// load, validate prints them.
	Warnings []string `yaml:"-"`
}

// Backend is one HAProxy backend (or IPVS service) and where its load comes from.
type Backend struct {
	// Name is the HAProxy backend name (or a label for an IPVS service).
	Name string `yaml:"name"`
	// Source says where the servers' load is read.
	Source Source `yaml:"source"`
	// IPVS, when set, makes this backend an IPVS virtual service instead of an HAProxy backend.
	IPVS *lvs.Config `yaml:"ipvs"`
	// HAProxy, when set, is the runtime socket of this backend's HAProxy
	// instead of the top-level one (socket.go).
	HAProxy *haproxy.Config `yaml:"haproxy"`
	// Match is how the source's series are matched to servers: "name" (the
	// default) or "address" (match.go).
	Match string `yaml:"match"`
	// FastSignal is "on" (the default) or "off": whether an HAProxy backend
	// weighs by HAProxy's fast local signal, calibrated by the source; or
	// "kernel", "sessions" or "stat": on, read by that reader alone.
	FastSignal string `yaml:"fast_signal"`
	// Calibration tunes how the source calibrates the fast signal.
	Calibration Calibration `yaml:"calibration"`
	// Shed, when set, closes the heaviest session of a server that stays hot.
	Shed *Shed `yaml:"shed"`
	// Pin places the backend's heavy clients through its stick table
	// (pin.go); nil: pinned when HAProxy has the table.
	Pin *Pin `yaml:"pin"`
	// DryRun makes the daemon cycle, plan and export the backend without
	// writing anything to it (run --dry-run sets it on every backend).
	DryRun bool `yaml:"dry_run"`
	// Policy holds the weighting function and the guards around it.
	weighter.Policy `yaml:",inline"`
}

// UnmarshalYAML decodes a backend over the policy defaults. yaml.v3 builds
// list items from zero values, so the defaults are set here rather than
// before decoding.
func (b *Backend) UnmarshalYAML(unmarshal func(any) error) error {
	*b = newBackend()
	type plain Backend // without this method, so that unmarshal does not come back here
	return unmarshal((*plain)(b))
}

// Default returns a configuration with every top-level default and no
// backends; its interval is set by Validate, from the backends.
func Default() Config {
	return Config{
		Interval:   intervalAuto,
		Jitter:     DefaultJitter,
		Listen:     DefaultListen,
		PeerClient: DefaultPeerClient(),
		HAProxy:    haproxy.Config{Socket: DefaultSocket},
	}
}

// CycleTimeout is the timeout of one cycle: Timeout, or Interval when unset.
func (c *Config) CycleTimeout() time.Duration {
	if c.Timeout > 0 {
		return time.Duration(c.Timeout)
	}
	return time.Duration(c.Interval)
}

// Validate checks the values that decoding alone cannot. Each problem is a
// *FieldError naming the key it is about. An interval left unset gets its
// default here, which depends on the backends (resolveInterval).
func (c *Config) Validate() error {
	c.resolveInterval()
	var problems []*FieldError
	add := func(err error, keys ...any) { problems = append(problems, keyed(err, keys...)...) }
	if time.Duration(c.Interval) < MinInterval {
		// 1ms is a typo for 1m far more often than a wish: it would cycle
		// back to back against HAProxy and the metrics source.
		add(fmt.Errorf("interval: must be at least %s, got %s", MinInterval, c.Interval), "interval")
	}
	if c.Timeout < 0 {
		add(fmt.Errorf("timeout: must not be negative, got %s", c.Timeout), "timeout")
	}
	if !(c.Jitter >= 0 && c.Jitter < 1) { // written so that NaN fails too
		add(fmt.Errorf("jitter: must be in [0, 1), got %g", c.Jitter), "jitter")
	}
	add(checkListen(c.Listen), "listen")
	for _, p := range c.checkPeers() {
		add(p.err, "peers", p.index)
	}
	problems = append(problems, c.validatePeerClient()...)
	if len(c.Backends) == 0 {
		add(errors.New("backends: at least one backend is required"), "backends")
	}
	if c.usesHAProxy() {
		add(c.HAProxy.Validate(), "haproxy")
	}
	problems = append(problems, c.validateSockets()...)
	seen := map[string]bool{}
	for i := range c.Backends {
		b := &c.Backends[i]
		found := b.validate()
		if b.Name != "" && seen[b.Name] {
			found = append(found, keyed(fmt.Errorf("name: duplicate backend %q", b.Name), "name")...)
		}
		seen[b.Name] = true
		problems = append(problems, b.inBackend(i, found)...)
	}
	return joinFields(problems)
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
		if b.IPVS == nil || b.Source.NeedsHAProxy() {
			return true
		}
	}
	return false
}

// validate returns the backend's problems, their keys relative to the backend.
func (b *Backend) validate() []*FieldError {
	var problems []*FieldError
	if b.Name == "" {
		problems = append(problems, keyed(errors.New("name: missing"), "name")...)
	} else if b.IPVS == nil {
		// Sent on the runtime socket in every command: a space or ';' would
		// split the command, and run would fail (or worse) at every cycle.
		if err := haproxy.ValidName(b.Name); err != nil {
			problems = append(problems, keyed(fmt.Errorf("name: %w", err), "name")...)
		}
	}
	problems = append(problems, b.Source.validate(b.IPVS == nil)...)
	problems = append(problems, b.validateFast()...)
	problems = append(problems, b.validateShed()...)
	problems = append(problems, b.validatePin()...)
	problems = append(problems, b.validateSocket()...)
	problems = append(problems, b.validateMatch()...)
	if b.IPVS != nil {
		problems = append(problems, keyed(b.IPVS.Validate(), "ipvs")...)
		if b.Source.NeedsHAProxy() {
			problems = append(problems, keyed(fmt.Errorf("source.%s: HAProxy statistics cannot feed an IPVS service", b.Source.Kind()))...)
		}
	}
	return append(problems, keyed(b.Policy.Validate())...)
}

// inBackend places problems found in backend i under it: their keys below
// backends[i], their messages after its label.
func (b *Backend) inBackend(i int, problems []*FieldError) []*FieldError {
	for _, p := range problems {
		p.keys = append([]any{"backends", i}, p.keys...)
		p.within = b.label(i)
	}
	return problems
}

// label names backend i in messages: by its name when HAProxy could take
// it, else by its index alone. A name HAProxy could not take is never
// quoted back: it may hold a line break (which would split the one line
// each problem gets), markup that a status page or log viewer renders, or
// a secret pasted in the wrong place; its problem names the character.
func (b *Backend) label(i int) string {
	if b.Name != "" && haproxy.ValidName(b.Name) == nil {
		return fmt.Sprintf("backends[%d] (%s)", i, b.Name)
	}
	return fmt.Sprintf("backends[%d]", i)
}

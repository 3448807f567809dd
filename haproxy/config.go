package haproxy

import (
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
)

// DefaultTimeout bounds the dial and each wait while writing a request or reading
// a reply on the runtime socket. The caller's context bounds the whole round trip.
const DefaultTimeout = 2 * time.Second

// Config says how to reach HAProxy's runtime API.
type Config struct {
	// Socket is an admin-level stats socket: a unix path ("/run/haproxy/admin.sock")
	// or a TCP "host:port"; with Master, the master CLI's (`haproxy -W -S`).
	Socket string `yaml:"socket"`
	// Master says Socket is HAProxy's master CLI: every command goes to the
	// current worker (`@1`), found afresh at each exchange, so a reload needs
	// no restart (master.go).
	Master bool `yaml:"master"`
	// Timeout bounds the dial and each stall while writing a request or reading
	// a reply (a long batch that keeps moving is not cut); 0 means DefaultTimeout.
	Timeout duration.Duration `yaml:"timeout"`
	// ConfigFile is HAProxy's configuration file; when set, validate and
	// run warn (at start and at each reload) about what in it keeps backends from being weighted
	// (package haproxycfg).
	ConfigFile string `yaml:"config_file"`
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Socket == "" {
		return field.Errorf("socket", "haproxy: socket is required")
	}
	if c.Timeout < 0 {
		return field.Errorf("timeout", "haproxy: timeout %s is negative", c.Timeout)
	}
	return nil
}

func (c Config) timeout() time.Duration { return c.StallTimeout() }

// StallTimeout is how long one dial or one stall of a request or reply may
// last; a batch of weights once sent is finished up to this long past the
// cycle's deadline (batch.go).
func (c Config) StallTimeout() time.Duration {
	if c.Timeout == 0 {
		return DefaultTimeout
	}
	return time.Duration(c.Timeout)
}

// network tells a unix socket path from a TCP host:port.
func (c Config) network() string {
	if isUnixPath(c.Socket) {
		return "unix"
	}
	return "tcp"
}

func isUnixPath(s string) bool {
	if len(s) > 0 && (s[0] == '/' || s[0] == '.') {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return false
		}
	}
	return true
}

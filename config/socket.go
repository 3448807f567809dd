package config

import (
	"fmt"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
)

// A backend may name its own runtime socket (`haproxy:` under the backend),
// so that one daemon drives several HAProxy processes; the top-level
// `haproxy:` is the default. The daemon builds one client per socket, and a
// client is what reads `show stat` and `show sess all` once per cycle for
// all its backends: one read per socket, whatever the number of backends.

// SocketOf returns the runtime socket settings of backend b: its own
// `haproxy:` block, whose unset timeout is the top-level one, or else the
// top-level block.
func (c *Config) SocketOf(b *Backend) haproxy.Config {
	if b.HAProxy == nil {
		return c.HAProxy
	}
	s := *b.HAProxy
	if s.Timeout == 0 {
		s.Timeout = c.HAProxy.Timeout
	}
	return s
}

// UsesSocket reports whether backend b talks to HAProxy: an HAProxy backend,
// or an IPVS service weighted by HAProxy's statistics.
func (b *Backend) UsesSocket() bool {
	return b.IPVS == nil || b.Source.NeedsHAProxy()
}

// validateSocket checks a backend's own `haproxy:` block.
func (b *Backend) validateSocket() []*FieldError {
	if b.HAProxy == nil {
		return nil
	}
	if !b.UsesSocket() {
		return keyed(fmt.Errorf("haproxy: an IPVS service whose source does not read HAProxy uses no runtime socket"), "haproxy")
	}
	return keyed(b.HAProxy.Validate(), "haproxy")
}

// validateSockets refuses one socket given two ways (a timeout or master
// setting that differs between two backends, or between a backend and the
// top level): the daemon has one client per socket.
func (c *Config) validateSockets() []*FieldError {
	var problems []*FieldError
	first := map[string]haproxy.Config{}
	where := map[string]string{}
	for i := range c.Backends {
		b := &c.Backends[i]
		if !b.UsesSocket() {
			continue
		}
		s := c.SocketOf(b)
		if s.Socket == "" {
			continue // the socket's own validation says it
		}
		label := "the top-level haproxy"
		if b.HAProxy != nil {
			label = b.label(i)
		}
		prev, seen := first[s.Socket]
		switch {
		case !seen:
			first[s.Socket], where[s.Socket] = s, label
		case prev != s:
			problems = append(problems, b.inBackend(i, keyed(fmt.Errorf("haproxy: socket %s is also set by %s with other settings (%+v here, %+v there): one socket takes one set of settings",
				s.Socket, where[s.Socket], s, prev), "haproxy", "socket"))...)
		}
	}
	return problems
}

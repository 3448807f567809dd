// Package haproxy reads and writes backend server weights over HAProxy's runtime
// API (an admin-level stats socket, unix or TCP).
//
// A Backend implements weighter.Target. Every call opens its own connection, so an
// HAProxy that restarts (new socket, runtime weights reset to the configured ones)
// is picked up on the next cycle without restarting the daemon, and servers added
// or removed at runtime show up in the next Servers read. All writes of a cycle go
// through one connection as one request, and are verified by reading back; a
// request once sent is read to the end, past the cycle's deadline (batch.go).
package haproxy

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Errors a caller can tell apart with errors.Is.
var (
	// ErrNoBackend: HAProxy has no backend of that name.
	ErrNoBackend = errors.New("no such backend")
	// ErrNoServer: the backend has no server of that name.
	ErrNoServer = errors.New("no such server")
	// ErrStaticWeights: the backend's algorithm ignores or refuses runtime weights
	// (static-rr, first, map-based hashing).
	ErrStaticWeights = errors.New("backend algorithm does not accept runtime weights")
	// ErrInvalidWeight: a weight outside 0..256 was refused before being sent.
	ErrInvalidWeight = weighter.ErrInvalidWeight
)

// Client talks to one HAProxy process through its runtime socket.
type Client struct {
	cfg    Config
	trace  func(cmds []string) // tests: sees each round trip's commands
	local  localState          // the shared `show sess all` of ReadLocal (local.go)
	health health              // how the socket last answered (health.go)
	// zeroes is the record of the weight-0 drains this process made, which
	// Restore undoes and no other (snapshot.go): the one its owner handed
	// every Client (OwnZeroes), or the Client's own.
	zeroes *ownzero.Record
	// pid, through the master CLI, is the worker the Client's commands go
	// to (@!pid: the current worker or an old one); 0 is the current
	// worker (@1). See inWorker.
	pid int
}

// Option changes how New builds a Client.
type Option func(*Client)

// OwnZeroes makes the Client record the weight-0 drains it writes in r and
// take as the process's own those r has: a daemon hands every Client it
// builds (a reload builds new ones while the old ones restore) the same.
// Without it a Client keeps its own record.
func OwnZeroes(r *ownzero.Record) Option {
	return func(c *Client) { c.zeroes = r }
}

// New returns a client for cfg. It does not connect: each operation dials.
func New(cfg Config, opts ...Option) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, zeroes: &ownzero.Record{}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Backend returns the weighter.Target for the named backend.
func (c *Client) Backend(name string) *RuntimeBackend {
	return &RuntimeBackend{c: c, name: name, now: time.Now}
}

// checkName refuses names HAProxy cannot have (it allows letters, digits and
// ".:_-" only). Anything else would not just miss: the CLI drops a backslash (so
// `s\2` names server s2), splits on spaces and ";", and a line ending in "<<"
// starts a payload that swallows the commands after it.
func checkName(kind, name string) error {
	if name == "" {
		return fmt.Errorf("haproxy: empty %s name", kind)
	}
	if err := ValidName(name); err != nil {
		return fmt.Errorf("haproxy: invalid %s name %q: %w", kind, name, err)
	}
	return nil
}

func isNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".:_-", r)
}

// classify maps HAProxy's error texts to the package's sentinel errors.
func classify(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "No such server"):
		return fmt.Errorf("%w (%s)", ErrNoServer, msg)
	case strings.Contains(msg, "No such backend"), strings.Contains(msg, "Can't find backend"),
		strings.Contains(msg, "No such proxy"):
		return fmt.Errorf("%w (%s)", ErrNoBackend, msg)
	case strings.Contains(msg, "static LB algorithm"):
		return fmt.Errorf("%w (%s)", ErrStaticWeights, msg)
	}
	return err
}

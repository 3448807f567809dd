// Package weighter turns per-server load series into HAProxy (or IPVS) weights.
//
// It is pure: no network, no files, no processes. Loads come in through a Source,
// weights go out through a Target; both are small interfaces implemented by the
// sources/, haproxy/ and lvs/ packages (and by fakes in tests and the simulator).
//
// The flow of one cycle for one backend is
//
//	Source.Fetch → Loads → aggregate → weighting Func → policy → Plan → Target.SetWeights
//
// The Plan is the one value that the dry-run prints, the writers apply, the metrics
// export and the simulator scores.
package weighter

import (
	"context"
	"fmt"
	"time"
)

// Point is one sample of a server's load. A null sample has Value NaN.
type Point struct {
	Time  time.Time
	Value float64
}

// Series is one server's load samples, oldest first.
type Series []Point

// Loads maps a server name (as HAProxy or IPVS knows it) to its load series.
type Loads map[string]Series

// Source reads the current load of every server of one backend.
type Source interface {
	// Fetch reads the loads. servers are the backend's servers as the
	// cycle has just read them from the target: a source that needs them
	// (to match its series by address, to read the fast signal of each) is
	// given them rather than keeping its own copy of the target's last read,
	// so that every part of a cycle sees the same servers. Most sources
	// ignore them.
	Fetch(ctx context.Context, servers []ServerState) (Loads, error)
}

// Names returns the names of servers, in their order.
func Names(servers []ServerState) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Name
	}
	return out
}

// AdminState is the operator-controlled state of a server.
type AdminState string

// Admin states as HAProxy reports them.
const (
	AdminReady AdminState = "ready"
	AdminDrain AdminState = "drain"
	AdminMaint AdminState = "maint"
)

// ServerState is what a Target reports about one of its servers.
type ServerState struct {
	Name    string
	Address string // "ip:port" (HAProxy, IPVS)
	// Host is the name HAProxy resolves the server's address from
	// (srv_fqdn: `server s1 web-1.example:80 resolvers dns`), "" when none.
	Host          string
	Weight        int // current effective weight, 0..256
	InitialWeight int // weight from the configuration file
	Admin         AdminState
	Operational   string // "up", "down", "stopping"
	// Sessions is the server's open connections now (HAProxy's scur); read
	// only by a policy with connection_life set.
	Sessions int
	// OwnZero: Weight is 0 and it is this process's own write (a drain or
	// quiesce), as the record of them that the target writes through says
	// (internal/ownzero). Any other weight 0 is an operator's drain (or
	// keepalived's), which the Controller leaves alone.
	OwnZero bool
}

// Change is one weight a Target must write.
type Change struct {
	Server string
	Weight int
}

// Target is where weights are written: an HAProxy backend or an IPVS service.
type Target interface {
	// Servers reads the current state of every server of the target.
	Servers(ctx context.Context) ([]ServerState, error)
	// SetWeights writes all changes, as one batch where the target allows it.
	// A failure of individual servers is reported as errors joined with
	// errors.Join, each a *ServerError, so callers can attribute them. A
	// batch sent whose outcome is not known (its replies lost) is an
	// *UnconfirmedError.
	SetWeights(ctx context.Context, changes []Change) error
}

// UnconfirmedError is a write that reached the target, or may have, and
// whose outcome is not known: the replies were lost (a hung or restarted
// HAProxy), so any of Sent may have been applied, all, or none. None counts
// as written; the Controller remembers Sent, so that the next cycle takes a
// server it finds at the weight sent for the daemon's own write applied
// late, not for a weight changed outside.
type UnconfirmedError struct {
	Sent []Change
	Err  error
}

func (e *UnconfirmedError) Error() string { return e.Err.Error() }

func (e *UnconfirmedError) Unwrap() error { return e.Err }

// ServerError attributes a write failure to one server.
type ServerError struct {
	Server string
	Err    error
}

func (e *ServerError) Error() string { return fmt.Sprintf("server %s: %v", e.Server, e.Err) }

func (e *ServerError) Unwrap() error { return e.Err }

// MaxWeight is the largest weight HAProxy's runtime API accepts.
const MaxWeight = 256

// ValidWeight reports whether w can be written to HAProxy or IPVS (0 = drain/quiesce).
func ValidWeight(w int) bool { return w >= 0 && w <= MaxWeight }

package daemon

import (
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/fastsignal"
	"github.com/haproxy-weighter/haproxy-weighter/statuspage"
)

// The status page (GET /) is rendered by statuspage from what the daemon
// hands it each request: the backends of the running group, each with its
// last cycles and the history its runner keeps.

// statusPage is the page as of now.
func (d *Daemon) statusPage() statuspage.Page {
	now := d.clock.Now()
	p := statuspage.Page{Now: now, Interval: time.Duration(d.config().Interval)}
	p.Ready, p.NotReady = d.Ready()
	if g := d.current(); g != nil {
		for _, r := range g.runners {
			p.Backends = append(p.Backends, r.status(now))
		}
	}
	return p
}

// status is the runner's backend as the status page takes it.
func (r *runner) status(now time.Time) statuspage.Backend {
	r.mu.Lock()
	b := statuspage.Backend{Last: r.last, Plan: r.plan, LastOK: r.lastOK, Ready: r.readyLocked(now), History: r.history}
	r.mu.Unlock()
	b.Name, b.Kind, b.DryRun, b.Loads = r.unit.Backend.Name, r.unit.Kind, r.unit.dryRun, r.unit.loads()
	if n, ok := r.unit.clients(); ok {
		b.Clients = &statuspage.Clients{Open: n.Open, Tracked: n.Tracked, Untracked: n.Untracked}
	}
	if r.unit.client != nil {
		b.Socket = r.unit.socket.Socket
	}
	return b
}

// clients is what the newest socket table read learnt of a pinning
// backend's clients; false when the backend does not pin or its clients
// were not read (no listeners, another reader serving, no read yet): the
// page and /metrics then say nothing of them.
func (u *managedBackend) clients() (fastsignal.ClientCounts, bool) {
	if u.fast == nil || u.fast.chain == nil || u.Backend == nil || u.Backend.Pinner == nil {
		return fastsignal.ClientCounts{}, false
	}
	n := u.fast.chain.Clients()
	return n, n.Read
}

// loads says what the backend's loads are made of, for the status page.
func (u *managedBackend) loads() statuspage.Loads {
	l := statuspage.Loads{Source: u.source.Kind(), FastOff: u.fastOff}
	if unit, ok := u.source.Unit(); ok {
		su := statuspage.Unit(unit)
		l.Unit = &su
	}
	switch {
	case u.fast == nil:
		l.Fast = statuspage.FastNone
	case u.fast.chain == nil: // IPVS counts connections
		l.Fast = statuspage.FastIPVS
	default:
		l.Fast = statuspage.FastHAProxy
	}
	return l
}

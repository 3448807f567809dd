package peers

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// ownRead is a backend's newest own reading, as published.
type ownRead struct {
	at      time.Time
	span    time.Duration
	servers map[string]serverRead
	counts  bool
}

// publish keeps the backend's newest own reading for the peers, each
// server with its address in addrs (by name).
func (p *Set) publish(backend string, r weighter.LocalRead, addrs map[string]string) {
	if r.Since.IsZero() || r.Dead != nil {
		return // no rate yet, or a dead signal: nothing a peer can add
	}
	servers := make(map[string]serverRead, len(r.Servers))
	for name, c := range r.Servers {
		if !c.Reset {
			servers[name] = serverRead{BytesPerSecond: c.Rate, Sessions: c.Sessions, Address: addrs[name]}
		}
	}
	p.mu.Lock()
	p.own[backend] = ownRead{at: r.At, span: r.At.Sub(r.Since), servers: servers, counts: r.Counts}
	p.mu.Unlock()
}

// Forget drops the published readings of backends not in keep (a reload
// removed them), and their count of peers added.
func (p *Set) Forget(keep []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name := range p.own {
		if !slices.Contains(keep, name) {
			delete(p.own, name)
			p.metrics.ForgetBackend(name)
		}
	}
}

// ServeHTTP serves this daemon's own readings (Path).
func (p *Set) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	now := p.now()
	a := answer{Instance: p.instance, Backends: map[string]backendRead{}}
	p.mu.Lock()
	for name, r := range p.own {
		a.Backends[name] = backendRead{AgeSeconds: max(now.Sub(r.at), 0).Seconds(),
			SpanSeconds: r.span.Seconds(), Servers: r.servers, Connections: r.counts}
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a)
}

package peers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// reading is one peer's fresh reading of a backend.
type reading struct {
	peer    string
	servers map[string]serverRead
}

// readings returns the fresh readings of backend from every peer, in the
// own signal's unit (connections: IPVS's counts), and a note for the plan's
// reason saying which were added and why others were left out.
func (p *Set) readings(backend string, connections bool) ([]reading, string) {
	p.mu.Lock()
	peers := slices.Sorted(maps.Keys(p.peers))
	// A copy: a reload's Poll changes p.peers while this cycle reads them.
	all, t := maps.Clone(p.peers), p.timing
	p.mu.Unlock()
	if len(peers) == 0 {
		// No peers (any more): no series, rather than the last count.
		p.metrics.ForgetBackend(backend)
		return nil, ""
	}
	now := p.now()
	var out []reading
	var left []string
	// Per instance, the first URL added: one daemon listed under two URLs
	// (a trailing /, its name and its address) is added once, not twice.
	addedAs := map[string]string{}
	for _, u := range peers {
		pr := all[u]
		pr.mu.Lock()
		a, asked, problem := pr.answer, pr.asked, pr.problem
		pr.mu.Unlock()
		if a == nil || problem != "" {
			left = append(left, fmt.Sprintf("%s: %s", u, problem))
			continue
		}
		b, ok := a.Backends[backend]
		if !ok {
			left = append(left, fmt.Sprintf("%s: no reading of backend %s", u, backend))
			continue
		}
		if b.Connections != connections {
			left = append(left, fmt.Sprintf("%s: backend %s counts %s there, %s here", u, backend,
				unitName(b.Connections), unitName(connections)))
			continue
		}
		// A backend whose reading stopped (its HAProxy dump fails, its fast
		// signal is dead there) is stale on its own; the peer's others go on.
		age := now.Sub(asked).Seconds() + b.AgeSeconds
		stale := t.stale(age, b.SpanSeconds)
		p.logStale(pr, backend, stale, age)
		if stale {
			left = append(left, fmt.Sprintf("%s: stale (%.3gs old)", u, age))
			continue
		}
		if first, ok := addedAs[a.Instance]; ok {
			left = append(left, fmt.Sprintf("%s: the same daemon as %s", u, first))
			continue
		}
		out = append(out, reading{peer: u, servers: b.Servers})
		addedAs[a.Instance] = u
	}
	p.metrics.SetAdded(backend, len(out))
	note := fmt.Sprintf("peers %d of %d added", len(out), len(peers))
	if len(left) > 0 {
		note += " (left out: " + strings.Join(left, "; ") + ")"
	}
	return out, note
}

// noneAdded says that the backend's cycle added no peer's reading: its own
// read failed, and it weighs by its source alone.
func (p *Set) noneAdded(backend string) {
	p.mu.Lock()
	none := len(p.peers) == 0
	p.mu.Unlock()
	if none {
		p.metrics.ForgetBackend(backend)
		return
	}
	p.metrics.SetAdded(backend, 0)
}

// unitName says what a fast signal counts.
func unitName(connections bool) string {
	if connections {
		return "connections (IPVS)"
	}
	return "bytes (HAProxy)"
}

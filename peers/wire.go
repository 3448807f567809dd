// Package peers adds other balancers' fast readings to a daemon's own: the
// /peer/fast wire format and its validation, the HTTP client that asks the
// peers, the pollers, the matching of their readings to the own servers by
// address, and the reader decorator that adds them to a backend's local
// read. The daemon only wires it: it starts and stops the pollers on run
// and reload, and serves Path from a Set.
//
// With several balancers in front of the same servers, each daemon sees
// only its own balancer's share of the fresh load; the others' reaches it
// through the external metric, 15-60 s late, while connections turn over
// every 30 s (docs/research/fresh-by-default.md: 47 % of the gap with its own signal,
// 80 % with every balancer's). So each daemon publishes its own per-server
// fast readings at Path, fetches its peers' in the background, and adds the
// fresh ones to its own signal: rates and sessions summed per server, the
// peers' rates integrated into the byte counter its calibration takes. A
// peer that is down, slow, stale, answers garbage or is this daemon itself
// is left out, in the plan's reason, haproxy_weighter_peer_up and one log
// line per change.
package peers

import (
	"errors"
	"fmt"
	"math"
)

// Path is where a daemon serves its own fast readings to its peers.
const Path = "/peer/fast"

// maxRate and maxSessions bound a peer's per-server reading: 1e12 B/s is
// 8 Tbit/s, 1e9 sessions beyond any HAProxy's maxconn.
const (
	maxRate     = 1e12
	maxSessions = 1e9
)

// maxBody bounds a peer's answer (a few hundred bytes per server).
const maxBody = 4 << 20

// answer is what Path serves: this daemon's own readings (never its
// peers'), per backend.
type answer struct {
	// Instance is a random id of the daemon process, so that a daemon listed
	// as its own peer is recognised and left out rather than counted twice.
	Instance string                 `json:"instance"`
	Backends map[string]backendRead `json:"backends"`
}

// backendRead is one backend's newest reading of its own balancer.
type backendRead struct {
	// AgeSeconds is how old the reading was when served (the reader's clock:
	// the peer's clock is never compared with it).
	AgeSeconds float64 `json:"age_seconds"`
	// SpanSeconds is the span its rates and session means cover.
	SpanSeconds float64               `json:"span_seconds"`
	Servers     map[string]serverRead `json:"servers"`
	// Connections: the backend is an IPVS service, whose fast signal counts
	// connections (bytes_per_second is then its mean open connections). A
	// reading in the other unit is left out, never added.
	Connections bool `json:"connections,omitempty"`
}

// serverRead is one server's fast reading on one balancer.
type serverRead struct {
	BytesPerSecond float64 `json:"bytes_per_second"`
	Sessions       float64 `json:"sessions"`
	// Address is the server's ip:port on that balancer, by which the
	// readings are matched (match.go); "" from a daemon that does not say.
	Address string `json:"address,omitempty"`
}

func (a *answer) validate() error {
	if a.Instance == "" {
		return errors.New("no instance")
	}
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }
	for name, b := range a.Backends {
		if bad(b.AgeSeconds) || bad(b.SpanSeconds) || b.SpanSeconds == 0 {
			return fmt.Errorf("backend %q: age %g s, span %g s", name, b.AgeSeconds, b.SpanSeconds)
		}
		for s, r := range b.Servers {
			// Beyond any server's, a rate added to the byte counter would
			// swamp the own bytes for good (float64 precision).
			if bad(r.BytesPerSecond) || bad(r.Sessions) || r.BytesPerSecond > maxRate || r.Sessions > maxSessions {
				return fmt.Errorf("backend %q server %q: %g B/s, %g sessions", name, s, r.BytesPerSecond, r.Sessions)
			}
		}
	}
	return nil
}

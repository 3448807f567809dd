package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/addrmatch"
	"github.com/haproxy-weighter/haproxy-weighter/metrics"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// ErrNoAddressMatch: with match: address, the source answered and not one of
// its series names a server's address.
var ErrNoAddressMatch = errors.New("match: address: no series names the address of a server of the backend")

// addressSource is a backend's configured source whose series are named by
// address (`match: address`): each fetch renames them to the servers at
// those addresses in the cycle's read of HAProxy (addrmatch), which the
// cycle hands to Fetch.
type addressSource struct {
	inner weighter.Source
	log   *slog.Logger

	mu      sync.Mutex
	last    addrmatch.Match // the newest fetch's match, for /metrics
	fetched bool
	warned  string // the left-out series last logged, so that a change is logged once
}

func newAddressSource(inner weighter.Source, log *slog.Logger) *addressSource {
	return &addressSource{inner: inner, log: log}
}

// Fetch fetches the source and matches its series to the servers by address.
// A series no server's address matches, or that two servers share, is left
// out (those servers have no data: the policy's missing applies), and said
// once in the log and in haproxy_weighter_address_unmatched_series; a source
// none of whose series matches fails the fetch.
func (a *addressSource) Fetch(ctx context.Context, servers []weighter.ServerState) (weighter.Loads, error) {
	loads, err := a.inner.Fetch(ctx, servers)
	if err != nil {
		return nil, err
	}
	if len(loads) > 0 && servers == nil {
		return nil, errors.New("match: address: no servers were read to match the series to")
	}
	m := addrmatch.Servers(loads, servers)
	a.mu.Lock()
	a.last, a.fetched = m, true
	a.mu.Unlock()
	a.report(m)
	if len(loads) > 0 && len(m.Matched) == 0 {
		return nil, fmt.Errorf("%w: %d came back, such as %s; the servers are at %s%s",
			ErrNoAddressMatch, len(loads), weighter.QuoteSome(slices.Sorted(maps.Keys(loads))), weighter.QuoteSome(addresses(servers)), ambiguity(m))
	}
	return m.Loads, nil
}

// report logs the series left out when that set changes.
func (a *addressSource) report(m addrmatch.Match) {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(m.Ambiguous)) {
		parts = append(parts, fmt.Sprintf("%s is the address of %s", name, strings.Join(m.Ambiguous[name], " and ")))
	}
	for _, server := range slices.Sorted(maps.Keys(m.Duplicate)) {
		parts = append(parts, fmt.Sprintf("%s is matched by %s", server, strings.Join(m.Duplicate[server], " and ")))
	}
	now := strings.Join(parts, "; ")
	a.mu.Lock()
	changed := now != a.warned
	a.warned = now
	a.mu.Unlock()
	switch {
	case !changed:
	case now != "":
		a.log.Warn("series left out by address match", "reason", now, "effect", "their servers have no data")
	default:
		a.log.Info("every series matched by address again")
	}
	if len(m.Unknown) > 0 {
		a.log.Debug("series for no server's address", "series", m.Unknown)
	}
}

// ReadThrough passes the new target a reload keeps the source for on to a
// source that reads HAProxy (the addresses come with each Fetch).
func (a *addressSource) ReadThrough(sr haproxy.StatsReader) {
	if r, ok := a.inner.(readsThrough); ok {
		r.ReadThrough(sr)
	}
}

// state is the newest fetch's match for /metrics.
func (a *addressSource) state() (addrmatch.Match, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last, a.fetched
}

// addressStates lists the servers' addresses of the configuration in force,
// as each HAProxy backend's newest cycle read them, and, for the backends
// that match by address, what the newest fetch left out.
func (d *Daemon) addressStates() []metrics.AddressState {
	g := d.current()
	if g == nil {
		return nil
	}
	var out []metrics.AddressState
	for _, r := range g.runners {
		u := r.unit
		if u.Kind != "haproxy" {
			continue
		}
		st := metrics.AddressState{Backend: u.Backend.Name, Servers: map[string]string{}}
		for _, s := range r.knownServers() {
			st.Servers[s.Name] = s.Address
		}
		if u.address != nil {
			st.ByAddress = true
			if m, ok := u.address.state(); ok {
				st.Unknown, st.Ambiguous, st.Duplicate = len(m.Unknown), len(m.Ambiguous), len(m.Duplicate)
			}
		}
		out = append(out, st)
	}
	return out
}

func addresses(servers []weighter.ServerState) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Address
		if s.Host != "" {
			out[i] += " (" + s.Host + ")"
		}
	}
	slices.Sort(out)
	return out
}

// ambiguity says which series were left out for an address servers share.
func ambiguity(m addrmatch.Match) string {
	if len(m.Ambiguous) == 0 {
		return ""
	}
	names := slices.Sorted(maps.Keys(m.Ambiguous))
	return fmt.Sprintf("; %d shared by several servers, such as %s (%s)", len(names), names[0], strings.Join(m.Ambiguous[names[0]], ", "))
}

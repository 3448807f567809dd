package haproxy

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// statsReuseMaxAge is how old a `show stat` read by Servers may be for the
// stats source to use it instead of reading again: the two calls of one cycle
// are milliseconds apart, and a read from a call outside a cycle (the start-up
// snapshot) must not stand in for a fresh one much later.
const statsReuseMaxAge = time.Second

// ReadStats returns the counters of every server of the backend and when they
// were read: the read the last Servers call made, once, if it is fresh, else a
// new `show stat`. The cycle calls Servers, then the source, so with
// `source: haproxy` one round trip per cycle gives the weights, the sessions
// and the counters.
func (b *RuntimeBackend) ReadStats(ctx context.Context) ([]ServerStat, time.Time, error) {
	b.mu.Lock()
	recent := b.recent
	b.recent = nil
	b.mu.Unlock()
	if recent != nil {
		if age := b.now().Sub(recent.at); age >= 0 && age <= statsReuseMaxAge {
			return recent.stats, recent.at, nil
		}
	}
	stats, err := b.c.Stats(ctx, b.name)
	return stats, b.now(), err
}

// keepStats hands the counters Servers read over to the next ReadStats.
func (b *RuntimeBackend) keepStats(stats []ServerStat) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recent = &statsRead{stats: stats, at: b.now()}
}

// statsRead is one `show stat` of a backend's servers and when it was read.
type statsRead struct {
	stats []ServerStat
	at    time.Time
}

// Stats reads the counters of every server of backend from `show stat`.
func (c *Client) Stats(ctx context.Context, backend string) ([]ServerStat, error) {
	if err := checkName("backend", backend); err != nil {
		return nil, err
	}
	replies, err := c.roundTrip(ctx, []string{statCmd(backend)})
	if err != nil {
		return nil, fmt.Errorf("backend %s: stats: %w", backend, err)
	}
	t, err := c.backendStat(ctx, backend, replies[0])
	if err != nil {
		return nil, err
	}
	return serverStats(backend, t)
}

// backendStat parses reply, the answer to `show stat <backend> <type> -1` with
// type including backends (2). HAProxy resolves that name to the first proxy
// of the name, so with a frontend of the same name it answers for the frontend:
// no row at all. Then backendStat asks again by the backend's id.
func (c *Client) backendStat(ctx context.Context, backend, reply string) (statTable, error) {
	t, err := parseStatReply(backend, reply)
	if err != nil || len(t.rows) > 0 {
		return t, err
	}
	iid, err := c.backendID(ctx, backend)
	if err != nil {
		return statTable{}, err
	}
	replies, err := c.roundTrip(ctx, []string{fmt.Sprintf("show stat #%s 6 -1", iid)})
	if err != nil {
		return statTable{}, fmt.Errorf("backend %s: stats by id %s: %w", backend, iid, err)
	}
	if t, err = parseStatReply(backend, replies[0]); err != nil {
		return statTable{}, err
	}
	if _, ok := t.backendRow(backend); !ok {
		return statTable{}, fmt.Errorf("backend %s: stats: %w: proxy #%s is not this backend", backend, ErrBadReply, iid)
	}
	return t, nil
}

// backendID looks up the proxy id (iid) of backend among all backends' rows.
func (c *Client) backendID(ctx context.Context, backend string) (string, error) {
	replies, err := c.roundTrip(ctx, []string{"show stat -1 2 -1"})
	if err != nil {
		return "", fmt.Errorf("backend %s: list backends: %w", backend, err)
	}
	t, err := parseStatReply(backend, replies[0])
	if err != nil {
		return "", err
	}
	row, ok := t.backendRow(backend)
	if !ok {
		return "", fmt.Errorf("backend %s: %w", backend, ErrNoBackend)
	}
	iid := t.get(row, "iid")
	if _, err := strconv.ParseUint(iid, 10, 32); err != nil {
		return "", fmt.Errorf("backend %s: stats: %w: iid %q", backend, ErrBadReply, iid)
	}
	return iid, nil
}

// parseStatReply classifies an error reply, else parses the CSV.
func parseStatReply(backend, reply string) (statTable, error) {
	if err := commandError(reply); err != nil {
		return statTable{}, fmt.Errorf("backend %s: stats: %w", backend, classify(err))
	}
	t, err := parseStat(reply)
	if err != nil {
		return statTable{}, fmt.Errorf("backend %s: stats: %w", backend, err)
	}
	return t, nil
}

// serverStats returns the server rows of t. A row of another proxy, or a
// server listed twice, means the reply is not for this backend.
func serverStats(backend string, t statTable) ([]ServerStat, error) {
	out := make([]ServerStat, 0, len(t.rows))
	seen := make(map[string]bool, len(t.rows))
	for _, r := range t.rows {
		if px := t.get(r, "pxname"); px != backend {
			return nil, fmt.Errorf("backend %s: stats: %w: row of proxy %q", backend, ErrBadReply, px)
		}
		if t.get(r, "svname") == "BACKEND" || t.get(r, "svname") == "FRONTEND" {
			continue
		}
		s := ServerStat{Server: t.get(r, "svname")}
		if seen[s.Server] {
			return nil, fmt.Errorf("backend %s: stats: %w: server %s listed twice", backend, ErrBadReply, s.Server)
		}
		seen[s.Server] = true
		for _, f := range []struct {
			col string
			dst *uint64
		}{{"bin", &s.BytesIn}, {"bout", &s.BytesOut}, {"stot", &s.SessionsTotal}, {"scur", &s.CurrentSessions}} {
			v, err := strconv.ParseUint(t.get(r, f.col), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("backend %s: stats: %w: server %s column %s: %w", backend, ErrBadReply, s.Server, f.col, err)
			}
			*f.dst = v
		}
		out = append(out, s)
	}
	return out, nil
}

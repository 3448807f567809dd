package haproxy

import (
	"context"
	"fmt"
	"strconv"

	"github.com/haproxy-weighter/haproxy-weighter/sources"
)

var _ sources.StatsReader = (*Client)(nil)

// Stats reads the counters of every server of backend from `show stat`.
func (c *Client) Stats(ctx context.Context, backend string) ([]sources.ServerStat, error) {
	if err := checkName("backend", backend); err != nil {
		return nil, err
	}
	replies, err := c.roundTrip(ctx, []string{statCmd(backend)})
	if err != nil {
		return nil, fmt.Errorf("backend %s: stats: %w", backend, err)
	}
	if err := commandError(replies[0]); err != nil {
		return nil, fmt.Errorf("backend %s: stats: %w", backend, classify(err))
	}
	t, err := parseStat(replies[0])
	if err != nil {
		return nil, fmt.Errorf("backend %s: stats: %w", backend, err)
	}
	return serverStats(backend, t)
}

func serverStats(backend string, t statTable) ([]sources.ServerStat, error) {
	out := make([]sources.ServerStat, 0, len(t.rows))
	for _, r := range t.rows {
		if t.get(r, "pxname") != backend || t.get(r, "svname") == "BACKEND" || t.get(r, "svname") == "FRONTEND" {
			continue
		}
		s := sources.ServerStat{Server: t.get(r, "svname")}
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

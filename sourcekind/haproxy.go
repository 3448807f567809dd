package sourcekind

import (
	"errors"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func init() {
	Register(Spec[haproxy.StatsConfig]{
		Name:         "haproxy",
		Rank:         30,
		Default:      func() haproxy.StatsConfig { return haproxy.StatsConfig{} },
		Validate:     haproxy.StatsConfig.Validate,
		ReadsHAProxy: true,
		New: func(c haproxy.StatsConfig, env Env) (weighter.Source, error) {
			if env.Stats == nil {
				return nil, errors.New("source haproxy: HAProxy statistics need an HAProxy backend")
			}
			return haproxy.NewStatsSource(c, env.Backend, env.Stats, env.Log)
		},
		// HAProxy's byte counters are what the fast signal reads live; a
		// session count is another load, which it cannot stand for.
		FastBytes: func(c haproxy.StatsConfig) (weighter.Bytes, bool) {
			switch c.Counter {
			case haproxy.CounterBytesIn:
				return weighter.BytesIn, true
			case haproxy.CounterBytesOut:
				return weighter.BytesOut, true
			}
			return "", false
		},
		Flags: []Flag[haproxy.StatsConfig]{
			{Name: "haproxy-counter", Key: "counter", Message: "haproxy source:",
				Usage: "use HAProxy's own statistics as load: bytes_in, bytes_out, sessions_total, current_sessions",
				Set:   func(c *haproxy.StatsConfig, v string) { c.Counter = v }},
			{Name: "per-connection", Key: "per_connection", Message: "haproxy source: per_connection", Bool: true,
				Usage: "with --haproxy-counter (a rate): divide each server's rate by its open sessions",
				Set:   func(c *haproxy.StatsConfig, v string) { c.PerConnection = v == "true" }},
		},
	})
}

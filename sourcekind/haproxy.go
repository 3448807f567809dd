package sourcekind

import (
	"errors"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// haproxyStats is `source: {haproxy: {…}}`: HAProxy's own statistics, read
// through the backend's runtime socket, which stand in for the fast signal
// rather than calibrate it.
var haproxyStats = erase(Spec[haproxy.StatsConfig]{
	Name:     "haproxy",
	Default:  func() haproxy.StatsConfig { return haproxy.StatsConfig{} },
	Validate: func(c *haproxy.StatsConfig) error { return c.Validate() },
	FastBytes: func(c *haproxy.StatsConfig) (weighter.Bytes, bool) {
		// HAProxy's byte counters are what the fast signal reads live; a
		// session count is another load, which it cannot stand for.
		switch c.Counter {
		case haproxy.CounterBytesIn:
			return weighter.BytesIn, true
		case haproxy.CounterBytesOut:
			return weighter.BytesOut, true
		}
		return "", false
	},
	ReadsHAProxy: true,
	Unit: func(c *haproxy.StatsConfig) (Unit, bool) {
		var u Unit
		switch c.Counter {
		case haproxy.CounterBytesIn, haproxy.CounterBytesOut:
			u = Unit{Symbol: "B/s", Header: "B/s"}
		case haproxy.CounterSessionsTotal:
			u = Unit{Symbol: "sess/s", Header: "new sessions/s"}
		case haproxy.CounterCurrentSessions:
			return Unit{Symbol: "sess", Header: "open sessions"}, true
		default:
			return Unit{}, false
		}
		if c.PerConnection {
			u.Header += " per connection"
			u.PerConnection = true
		}
		return u, true
	},
	// A running daemon holds its statistics until its reads span a rate
	// window; one cycle reads twice that far apart instead.
	ForOneCycle: haproxy.StatsConfig.ForOneCycle,
	Flags: []Flag[haproxy.StatsConfig]{
		{Name: "haproxy-counter", Key: "counter", Message: "haproxy source:",
			Usage: "use HAProxy's own statistics as load: bytes_in, bytes_out, sessions_total, current_sessions",
			Set:   func(c *haproxy.StatsConfig, v string) { c.Counter = v }},
		{Name: "per-connection", Key: "per_connection", Message: "haproxy source: per_connection", Bool: true,
			Usage: "with --haproxy-counter (a rate): divide each server's rate by its open sessions",
			Set:   func(c *haproxy.StatsConfig, v string) { c.PerConnection = v == "true" }},
	},
	Build: func(c haproxy.StatsConfig, env Env) (weighter.Source, error) {
		if env.Stats == nil {
			return nil, errors.New("source haproxy: HAProxy statistics need an HAProxy backend")
		}
		// Read through the backend's target, so the one `show stat` of a
		// cycle serves both.
		return haproxy.NewStatsSource(c, env.Backend, env.Stats, env.Log)
	},
})

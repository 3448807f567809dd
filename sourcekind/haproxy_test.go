package sourcekind

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
)

// TestHAProxyUnit: the unit of HAProxy's counters, which the status page
// writes; a load per connection is said to be one.
func TestHAProxyUnit(t *testing.T) {
	for _, tc := range []struct {
		cfg  haproxy.StatsConfig
		want Unit
		ok   bool
	}{
		{haproxy.StatsConfig{Counter: haproxy.CounterBytesIn}, Unit{"B/s", "B/s", false}, true},
		{haproxy.StatsConfig{Counter: haproxy.CounterBytesOut, PerConnection: true}, Unit{"B/s", "B/s per connection", true}, true},
		{haproxy.StatsConfig{Counter: haproxy.CounterSessionsTotal}, Unit{"sess/s", "new sessions/s", false}, true},
		{haproxy.StatsConfig{Counter: haproxy.CounterSessionsTotal, PerConnection: true}, Unit{"sess/s", "new sessions/s per connection", true}, true},
		{haproxy.StatsConfig{Counter: haproxy.CounterCurrentSessions}, Unit{"sess", "open sessions", false}, true},
		{haproxy.StatsConfig{Counter: "bogus"}, Unit{}, false},
	} {
		got, ok := haproxyStats.Unit(&tc.cfg)
		assert.Equal(t, tc.want, got, tc.cfg.Counter)
		assert.Equal(t, tc.ok, ok, tc.cfg.Counter)
	}
	for _, k := range []Kind{prometheus, graphite} {
		_, ok := k.Unit(k.New())
		assert.False(t, ok, "%s answers in whatever its query measures", k.Name())
	}
}

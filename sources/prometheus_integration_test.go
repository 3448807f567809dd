package sources

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// promRates are the per-second rates of the backfilled counter.
var promRates = map[string]float64{"node-1": 10, "node-2": 20, "node-3": 40, "other-host": 5}

// promData is an hour of samples every 15s around now, so queries at "now" see data.
func promData(now time.Time) string {
	d := testenv.PromHour(now, 15*time.Second).Type("weighter_rx", "counter")
	for _, s := range []string{"node-1", "node-2", "node-3", "other-host"} {
		d.Rate("weighter_rx_total", `server="`+s+`"`, promRates[s])
	}
	d.Type("node_load1", "gauge")
	for i, s := range []string{"node-1", "node-2"} {
		d.Constant("node_load1", `instance="`+s+`:9100"`, 0.5+float64(i))
	}
	return d.Type("weighter_mixed", "gauge").
		Constant("weighter_mixed", `server="node-1"`, math.NaN()).
		Constant("weighter_mixed", `server="node-2",shard="a"`, 1).
		Constant("weighter_mixed", `server="node-2",shard="b"`, 2).
		Constant("weighter_mixed", `server="node-3"`, 3).
		String()
}

func newProm(t *testing.T, url string, mod func(*PrometheusConfig)) (*Prometheus, *bytes.Buffer) {
	t.Helper()
	cfg := DefaultPrometheusConfig()
	cfg.URL = url
	mod(&cfg)
	var logs bytes.Buffer
	p, err := NewPrometheus(cfg, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	return p, &logs
}

// lastValues is the newest value of every server.
func lastValues(loads weighter.Loads) map[string]float64 {
	out := map[string]float64{}
	for s, ser := range loads {
		out[s] = ser[len(ser)-1].Value
	}
	return out
}

func assertValues(t *testing.T, want map[string]float64, loads weighter.Loads) {
	t.Helper()
	got := lastValues(loads)
	require.Len(t, got, len(want), "servers: %v", got)
	for s, v := range want {
		assert.InDelta(t, v, got[s], 1e-6, "server %s", s)
	}
}

func TestPrometheusIntegration(t *testing.T) {
	prom := testenv.StartPrometheus(t, promData(time.Now()))
	ctx := context.Background()

	t.Run("counter rates, instant", func(t *testing.T) {
		p, _ := newProm(t, prom.URL, func(c *PrometheusConfig) { c.Query = "rate(weighter_rx_total[1m])" })
		loads, err := p.Fetch(ctx, nil)
		require.NoError(t, err)
		assertValues(t, promRates, loads)
	})
	t.Run("counter rates, range, extra series dropped by regex", func(t *testing.T) {
		p, _ := newProm(t, prom.URL, func(c *PrometheusConfig) {
			c.Query, c.Range, c.Step = "rate(weighter_rx_total[1m])", duration.Duration(5*time.Minute), duration.Duration(time.Minute)
			c.ServerRegex = `^(node-\d+)$`
		})
		loads, err := p.Fetch(ctx, nil)
		require.NoError(t, err)
		assertValues(t, map[string]float64{"node-1": 10, "node-2": 20, "node-3": 40}, loads)
		for s, ser := range loads {
			assert.Len(t, ser, 6, s)
			for _, pt := range ser {
				assert.InDelta(t, promRates[s], pt.Value, 1e-6, s)
			}
		}
	})
	t.Run("timeout not a whole number of seconds", func(t *testing.T) {
		// Prometheus rejects a timeout parameter like "1.2s" (bad_data), which is
		// how Go prints such a duration: every query failed.
		p, _ := newProm(t, prom.URL, func(c *PrometheusConfig) {
			c.Query, c.ServerLabel, c.Timeout = "node_load1", "instance", duration.Duration(1500*time.Millisecond)
		})
		loads, err := p.Fetch(ctx, nil)
		require.NoError(t, err)
		assert.Len(t, loads, 2)
		ctx, cancel := context.WithTimeout(ctx, 2345*time.Millisecond) // a cycle deadline before the timeout
		defer cancel()
		p, _ = newProm(t, prom.URL, func(c *PrometheusConfig) {
			c.Query, c.ServerLabel, c.Timeout = "node_load1", "instance", duration.Duration(time.Minute)
		})
		_, err = p.Fetch(ctx, nil)
		require.NoError(t, err)
	})
	t.Run("gauge, instance label rewritten and mapped", func(t *testing.T) {
		p, _ := newProm(t, prom.URL, func(c *PrometheusConfig) {
			c.Query, c.ServerLabel, c.ServerRegex = "node_load1", "instance", `^([^:]+):\d+$`
			c.ServerMap = map[string]string{"node-1": "web1", "node-2": "web2", "node-9": "web9"}
		})
		loads, err := p.Fetch(ctx, nil)
		require.NoError(t, err)
		assertValues(t, map[string]float64{"web1": 0.5, "web2": 1.5}, loads)
	})
	t.Run("NaN and duplicate series fail only their server", func(t *testing.T) {
		p, logs := newProm(t, prom.URL, func(c *PrometheusConfig) { c.Query = "weighter_mixed" })
		loads, err := p.Fetch(ctx, nil)
		require.NoError(t, err)
		assertValues(t, map[string]float64{"node-3": 3}, loads)
		assert.Contains(t, logs.String(), `"server":"node-1"`)
		assert.Contains(t, logs.String(), "duplicate series")
	})
	t.Run("no data", func(t *testing.T) {
		p, _ := newProm(t, prom.URL, func(c *PrometheusConfig) { c.Query = "no_such_metric" })
		_, err := p.Fetch(ctx, nil)
		assert.ErrorIs(t, err, ErrNoData)
	})
	t.Run("parse error", func(t *testing.T) {
		p, _ := newProm(t, prom.URL, func(c *PrometheusConfig) { c.Query = "rate(weighter_rx_total[1m]" })
		_, err := p.Fetch(ctx, nil)
		require.ErrorIs(t, err, ErrQuery)
		assert.Contains(t, err.Error(), "parse error")
		assert.Contains(t, err.Error(), prom.URL)
	})
	t.Run("scalar result is a bad reply", func(t *testing.T) {
		p, _ := newProm(t, prom.URL, func(c *PrometheusConfig) { c.Query = "scalar(sum(node_load1))" })
		_, err := p.Fetch(ctx, nil)
		assert.ErrorIs(t, err, ErrBadReply)
	})
	t.Run("down, then recovers", func(t *testing.T) {
		p, _ := newProm(t, prom.URL, func(c *PrometheusConfig) { c.Query = "node_load1"; c.ServerLabel = "instance" })
		prom.Stop()
		_, err := p.Fetch(ctx, nil)
		require.ErrorIs(t, err, ErrUnreachable)
		prom.Start()
		loads, err := p.Fetch(ctx, nil)
		require.NoError(t, err)
		assert.Len(t, loads, 2)
	})
}

// nanFree is a guard used by several tests: sources never return NaN points.
func nanFree(t *testing.T, loads weighter.Loads) {
	t.Helper()
	for s, ser := range loads {
		for _, p := range ser {
			require.False(t, math.IsNaN(p.Value), "server %s has a NaN point", s)
		}
	}
}

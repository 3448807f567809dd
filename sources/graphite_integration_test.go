package sources

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func newGraphite(t *testing.T, url string, mod func(*GraphiteConfig)) (*Graphite, *bytes.Buffer) {
	t.Helper()
	cfg := DefaultGraphiteConfig()
	cfg.URL, cfg.From, cfg.Retries = url, "-10min", 0
	mod(&cfg)
	var logs bytes.Buffer
	g, err := NewGraphite(cfg, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	return g, &logs
}

// testPoints makes n points 10s apart ending 20s ago, with value(i).
func testPoints(now time.Time, n int, value func(i int) float64) []weighter.Point {
	end := now.Truncate(testenv.GraphiteStep).Add(-20 * time.Second)
	pts := make([]weighter.Point, n)
	for i := range pts {
		pts[i] = weighter.Point{Time: end.Add(-time.Duration(n-1-i) * testenv.GraphiteStep), Value: value(i)}
	}
	return pts
}

func intp(i int) *int { return &i }

// TestGraphiteIntegration shares one Graphite (start-up costs seconds) between subtests.
func TestGraphiteIntegration(t *testing.T) {
	gr := testenv.StartGraphite(t)
	ctx := context.Background()
	now := time.Now()
	rates := map[string]float64{"node-1": 10, "node-2": 20, "carbon-relay": 7}
	for s, r := range rates {
		gr.Write(t, "tcp."+s+".datapoints.received", testPoints(now, 20, func(i int) float64 { return float64(i) * 10 * r })...)
	}
	gr.Write(t, "loadavg.node-1.load1", testPoints(now, 6, func(int) float64 { return 0.5 })...)
	gr.Write(t, "loadavg.node-2.load1", testPoints(now, 6, func(int) float64 { return 2.25 })...)
	gappy := testPoints(now, 10, func(i int) float64 {
		if i%3 == 0 {
			return math.NaN()
		}
		return float64(i)
	})
	gr.Write(t, "gappy.node-1.x", gappy...)
	gr.Write(t, "tcp-service.node-x.datapoints.received", testPoints(now, 12, func(int) float64 { return 2 })...)
	// A count per interval, as carbon's metricsReceived or statsd's
	// stats_counts: about 30/s in 10 s steps, up and down around 300.
	perInterval := []float64{300, 280, 310, 290, 305, 270, 300, 315, 295, 290, 310, 285}
	gr.Write(t, "counts.node-1.requests", testPoints(now, len(perInterval), func(i int) float64 { return perInterval[i] })...)

	t.Run("counter rates by node index, wildcard extra series kept", func(t *testing.T) {
		g, logs := newGraphite(t, gr.URL, func(c *GraphiteConfig) {
			c.Target, c.ServerNode = "perSecond(tcp.*.datapoints.received)", intp(1)
		})
		loads, err := g.Fetch(ctx, nil)
		require.NoError(t, err)
		assert.NotContains(t, logs.String(), "not counters", "counters only go up")
		nanFree(t, loads)
		require.Len(t, loads, 3)
		for s, ser := range loads {
			assert.Len(t, ser, 19, "%s: perSecond's first point is null", s)
			for _, p := range ser {
				assert.InDelta(t, rates[s], p.Value, 1e-9, s)
			}
		}
	})
	t.Run("aliasByNode, extra series dropped by regex", func(t *testing.T) {
		g, _ := newGraphite(t, gr.URL, func(c *GraphiteConfig) {
			c.Target, c.ServerRegex = "aliasByNode(perSecond(tcp.*.datapoints.received),1)", `^(node-\d+)$`
		})
		loads, err := g.Fetch(ctx, nil)
		require.NoError(t, err)
		assertValues(t, map[string]float64{"node-1": 10, "node-2": 20}, loads)
	})
	t.Run("gauges mapped, server without series absent", func(t *testing.T) {
		g, _ := newGraphite(t, gr.URL, func(c *GraphiteConfig) {
			c.Target, c.ServerNode = "loadavg.*.load1", intp(-2)
			c.ServerMap = map[string]string{"node-1": "web1", "node-2": "web2", "node-3": "web3"}
		})
		loads, err := g.Fetch(ctx, nil)
		require.NoError(t, err)
		assertValues(t, map[string]float64{"web1": 0.5, "web2": 2.25}, loads)
	})
	t.Run("the seed's integral target", func(t *testing.T) {
		g, _ := newGraphite(t, gr.URL, func(c *GraphiteConfig) {
			c.Target, c.ServerNode = "integral(tcp-service.node-x.datapoints.received)", intp(1)
		})
		loads, err := g.Fetch(ctx, nil)
		require.NoError(t, err)
		assertValues(t, map[string]float64{"node-x": 24}, loads) // 12 points of 2
	})
	t.Run("nulls skipped", func(t *testing.T) {
		g, _ := newGraphite(t, gr.URL, func(c *GraphiteConfig) { c.Target, c.ServerNode = "gappy.*.x", intp(1) })
		loads, err := g.Fetch(ctx, nil)
		require.NoError(t, err)
		var want weighter.Series
		for _, p := range gappy {
			if !math.IsNaN(p.Value) {
				want = append(want, weighter.Point{Time: p.Time.UTC(), Value: p.Value})
			}
		}
		assert.Equal(t, weighter.Loads{"node-1": want}, loads)
	})
	t.Run("no match is no data", func(t *testing.T) {
		g, _ := newGraphite(t, gr.URL, func(c *GraphiteConfig) { c.Target = "no.such.*" })
		_, err := g.Fetch(ctx, nil)
		assert.ErrorIs(t, err, ErrNoData)
	})
	t.Run("bad target shows graphite's 400 text", func(t *testing.T) {
		g, _ := newGraphite(t, gr.URL, func(c *GraphiteConfig) { c.Target = "nosuchfunction(tcp.*.datapoints.received)" })
		_, err := g.Fetch(ctx, nil)
		require.ErrorIs(t, err, ErrQuery)
		assert.Contains(t, err.Error(), "unknown function: nosuchfunction")
	})
	t.Run("perSecond of a count per interval is said, once", func(t *testing.T) {
		g, logs := newGraphite(t, gr.URL, func(c *GraphiteConfig) {
			c.Target, c.ServerNode = "perSecond(counts.*.requests)", intp(1)
		})
		loads, err := g.Fetch(ctx, nil)
		require.NoError(t, err, "the loads are still used: the target is valid")
		require.Contains(t, loads, "node-1")
		for _, p := range loads["node-1"] {
			assert.Less(t, p.Value, 3.5, "the change between two intervals, not the ~30/s the counts say")
		}
		assert.Contains(t, logs.String(), `"msg":"rate of series that are not counters"`)
		assert.Contains(t, logs.String(), `"went_down":"6 of 11 steps"`)
		assert.Contains(t, logs.String(), `"example":"counts.node-1.requests"`)
		_, err = g.Fetch(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, 1, strings.Count(logs.String(), "not counters"), "said at the first fetch only")

		g, logs = newGraphite(t, gr.URL, func(c *GraphiteConfig) {
			c.Target, c.ServerNode = "scale(counts.*.requests, 0.1)", intp(1)
		})
		loads, err = g.Fetch(ctx, nil)
		require.NoError(t, err)
		assert.NotContains(t, logs.String(), "not counters")
		var sum float64
		for _, p := range loads["node-1"] {
			sum += p.Value
		}
		assert.InDelta(t, 3550.0/12/10, sum/float64(len(loads["node-1"])), 1e-9, "scaled by 1/interval: the rate")
	})
	t.Run("aliasByNode outside scale, as the README's carbon target", func(t *testing.T) {
		g, _ := newGraphite(t, gr.URL, func(c *GraphiteConfig) {
			c.Target = "aliasByNode(scale(loadavg.*.load1, 2),1)"
		})
		loads, err := g.Fetch(ctx, nil)
		require.NoError(t, err)
		assertValues(t, map[string]float64{"node-1": 1, "node-2": 4.5}, loads)
	})
	t.Run("down", func(t *testing.T) {
		g, logs := newGraphite(t, gr.URL, func(c *GraphiteConfig) { c.Target, c.Retries = "loadavg.*.load1", 1 })
		gr.Stop(t)
		_, err := g.Fetch(ctx, nil)
		require.ErrorIs(t, err, ErrUnreachable)
		assert.Contains(t, logs.String(), "retrying render request")
	})
}

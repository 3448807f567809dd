package sources

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// replay serves a reply recorded from the real server (../testdata/, shared by the
// packages; see its README.md) for every request.
func replay(t *testing.T, file string, status int) string {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "testdata", file))
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func series(start int64, values ...float64) weighter.Series {
	s := make(weighter.Series, len(values))
	for i, v := range values {
		s[i] = weighter.Point{Time: time.Unix(start+int64(i)*10, 0).UTC(), Value: v}
	}
	return s
}

func TestGraphiteFixtures(t *testing.T) {
	ctx := context.Background()
	g, _ := newGraphite(t, replay(t, "graphite-web-1.1.8/render-persecond-alias.json", 200), func(c *GraphiteConfig) { c.Target = "x" })
	loads, err := g.Fetch(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, weighter.Loads{
		"node-1": series(1796037670, 10, 10, 10, 10, 10),
		"node-2": series(1796037670, 20, 20, 20, 20, 20),
	}, loads)

	g, _ = newGraphite(t, replay(t, "graphite-web-1.1.8/render-nulls.json", 200), func(c *GraphiteConfig) { c.Target, c.ServerNode = "x", intp(1) })
	loads, err = g.Fetch(ctx, nil)
	require.NoError(t, err)
	want := append(series(1796037670, 1, 2), series(1796037700, 4, 5)...)
	assert.Equal(t, weighter.Loads{"node-1": want}, loads)

	g, _ = newGraphite(t, replay(t, "graphite-web-1.1.8/render-unknown-function-400.txt", 400), func(c *GraphiteConfig) { c.Target = "x" })
	_, err = g.Fetch(ctx, nil)
	require.ErrorIs(t, err, ErrQuery)
	assert.ErrorContains(t, err, "http 400: Invalid parameters (Received request for unknown function: nosuchfunction)")
}

func TestPrometheusFixtures(t *testing.T) {
	ctx := context.Background()
	p, _ := newProm(t, replay(t, "prometheus-2.42.0/query-rate.json", 200), func(c *PrometheusConfig) { c.Query = "x" })
	loads, err := p.Fetch(ctx, nil)
	require.NoError(t, err)
	assertValues(t, map[string]float64{"node-1": 10, "node-2": 20, "node-3": 40, "other-host": 5}, loads)
	assert.Equal(t, time.Unix(1796036800, 0).UTC(), loads["node-1"][0].Time)

	p, _ = newProm(t, replay(t, "prometheus-2.42.0/query_range-load1.json", 200), func(c *PrometheusConfig) {
		c.Query, c.Range, c.Step, c.ServerLabel, c.ServerRegex = "x", duration.Duration(5*time.Minute), duration.Duration(time.Minute), "instance", `^(.+):9100$`
	})
	loads, err = p.Fetch(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, loads["node-1"], 6)
	assertValues(t, map[string]float64{"node-1": 0.5, "node-2": 1.5}, loads)

	p, _ = newProm(t, replay(t, "prometheus-2.42.0/query-nan-duplicate.json", 200), func(c *PrometheusConfig) { c.Query = "x" })
	loads, err = p.Fetch(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, weighter.Loads{"node-3": {{Time: time.Unix(1796036800, 0).UTC(), Value: 3}}}, loads)

	p, _ = newProm(t, replay(t, "prometheus-2.42.0/query-parse-error-400.json", 400), func(c *PrometheusConfig) { c.Query = "x" })
	_, err = p.Fetch(ctx, nil)
	require.ErrorIs(t, err, ErrQuery)
	assert.ErrorContains(t, err, "parse error: unclosed left parenthesis")
}

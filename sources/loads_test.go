package sources

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestSeriesComeOldestFirst: weighter.Series is oldest first, and the weighter's
// "last" and max_age rely on it. A reply whose datapoints are in another order
// (a Graphite-compatible server, a proxy) must still give ordered series, or the
// weighter would take a stale point for the newest.
func TestSeriesComeOldestFirst(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `[{"target":"a","datapoints":[[3,1700000020],[1,1700000000],[null,1700000030],[2,1700000010]]},
			{"target":"b","datapoints":[[5,1700000000],[6,1700000010]]}]`)
	}))
	t.Cleanup(srv.Close)
	g, _ := newGraphite(t, srv.URL, func(c *GraphiteConfig) { c.Target = "x" })
	loads, err := g.Fetch(context.Background())
	require.NoError(t, err)
	assert.Equal(t, weighter.Loads{"a": series(1700000000, 1, 2, 3), "b": series(1700000000, 5, 6)}, loads)
}

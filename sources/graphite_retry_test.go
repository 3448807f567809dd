package sources

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGraphiteRetries: network errors, 429 and 5xx are retried, other replies
// are final; a wait longer than retry's cap (a long Retry-After) or past the
// fetch's deadline is not started, so the fetch ends with what Graphite said
// instead of "context deadline exceeded" at the end of the cycle.
func TestGraphiteRetries(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		retryAfter string
		deadline   time.Duration
		hits       int32
		kind       error
	}{
		{"5xx retried", http.StatusBadGateway, "", 5 * time.Second, 3, ErrBadReply},
		{"429 retried", http.StatusTooManyRequests, "", 5 * time.Second, 3, ErrQuery},
		{"4xx final", http.StatusNotFound, "", 5 * time.Second, 1, ErrQuery},
		{"retry-after beyond the cap", http.StatusServiceUnavailable, "3600", 5 * time.Second, 1, ErrBadReply},
		{"retry-after beyond the deadline", http.StatusTooManyRequests, "1", 500 * time.Millisecond, 1, ErrQuery},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				hits.Add(1)
				if c.retryAfter != "" {
					w.Header().Set("Retry-After", c.retryAfter)
				}
				w.WriteHeader(c.status)
				fmt.Fprint(w, "graphite says no")
			}))
			t.Cleanup(srv.Close)
			g, _ := newGraphite(t, srv.URL, func(cfg *GraphiteConfig) { cfg.Target, cfg.Retries = "x", 2 })
			ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
			defer cancel()
			_, err := g.Fetch(ctx, nil)
			require.ErrorIs(t, err, c.kind)
			assert.ErrorContains(t, err, fmt.Sprintf("http %d: graphite says no", c.status))
			assert.Equal(t, c.hits, hits.Load(), "requests")
		})
	}
}

// TestGraphiteNonJSONReplyIsShown: a 200 that is not JSON (an SSO login page,
// a proxy's notice) must say what came back, not only where the decoder choked.
func TestGraphiteNonJSONReplyIsShown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><title>Sign in to Acme SSO</title>\n<body>session expired</body></html>")
	}))
	t.Cleanup(srv.Close)
	g, _ := newGraphite(t, srv.URL, func(c *GraphiteConfig) { c.Target = "x" })
	_, err := g.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrBadReply)
	assert.ErrorContains(t, err, "<html><title>Sign in to Acme SSO</title> <body>session expired")
}

// TestGraphiteRenderPath: "/render" is appended to the configured URL unless
// it is already there, with or without a trailing slash.
func TestGraphiteRenderPath(t *testing.T) {
	for base, want := range map[string]string{
		"http://g":                   "/render",
		"http://g/":                  "/render",
		"http://g/graphite":          "/graphite/render",
		"http://g/graphite/":         "/graphite/render",
		"http://g/render":            "/render",
		"http://g/render/":           "/render",
		"http://g/graphite/render/?": "/graphite/render",
	} {
		assert.Equal(t, want, renderURL(GraphiteConfig{URL: base, Target: "x"}).Path, base)
	}
}

// TestGraphiteNoServerNameSaysWhatCame: when no series yields a server, the
// error shows a target as Graphite named it, so that a wrong server_node or
// server_regex can be seen.
func TestGraphiteNoServerNameSaysWhatCame(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `[{"target":"sumSeries(tcp.*.rx)","datapoints":[[1,1700000000]]}]`)
	}))
	t.Cleanup(srv.Close)
	g, _ := newGraphite(t, srv.URL, func(c *GraphiteConfig) { c.Target, c.ServerRegex = "x", `(node-\d+)` })
	_, err := g.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrNoData)
	assert.ErrorContains(t, err, `first target "sumSeries(tcp.*.rx)"`)
}

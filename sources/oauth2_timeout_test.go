package sources

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/stretchr/testify/assert"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// A token endpoint that never answers: prometheus/common asks it without
// the request's context, so the source bounds the token request itself.
func TestOAuth2HangingTokenEndpointIsBounded(t *testing.T) {
	release := make(chan struct{})
	token := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(token.Close)
	t.Cleanup(func() { close(release) })
	prom := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(prom.Close)
	for _, kind := range []string{"prometheus", "graphite"} {
		done := make(chan error, 1)
		go func() {
			o := &promconfig.OAuth2{ClientID: "weighter", ClientSecret: "s3cret", TokenURL: token.URL}
			if kind == "prometheus" {
				cfg := DefaultPrometheusConfig()
				cfg.URL, cfg.Query, cfg.Timeout = prom.URL, "up", duration.Duration(200*time.Millisecond)
				cfg.HTTP.OAuth2 = o
				p, err := NewPrometheus(cfg, nil)
				if err == nil {
					_, err = p.Fetch(context.Background(), nil)
				}
				done <- err
				return
			}
			cfg := DefaultGraphiteConfig()
			cfg.URL, cfg.Target, cfg.Retries, cfg.Timeout = prom.URL, "x", 0, duration.Duration(200*time.Millisecond)
			cfg.HTTP.OAuth2 = o
			g, err := NewGraphite(cfg, nil)
			if err == nil {
				_, err = g.Fetch(context.Background(), nil)
			}
			done <- err
		}()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, ErrUnreachable, kind)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the fetch still waits for the token endpoint", kind)
		}
	}
}

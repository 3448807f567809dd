package sources

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// oauth2Prometheus is a Prometheus source at promURL whose token comes from tokenURL.
func oauth2Prometheus(t *testing.T, promURL, tokenURL string) *Prometheus {
	t.Helper()
	cfg := DefaultPrometheusConfig()
	cfg.URL, cfg.Query, cfg.Timeout = promURL, "up", duration.Duration(2*time.Second)
	cfg.HTTP.OAuth2 = &promconfig.OAuth2{ClientID: "weighter", ClientSecret: "cs-s3cr3t-oauth2", TokenURL: tokenURL}
	p, err := NewPrometheus(cfg, nil)
	require.NoError(t, err)
	return p
}

// The token endpoint's token is what the queries carry.
func TestOAuth2TokenIsSent(t *testing.T) {
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "tok-123", "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(token.Close)
	auth := make(chan string, 1)
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"server":"s1"},"value":[1700000000,"5"]}]}}`)
	}))
	t.Cleanup(prom.Close)
	loads, err := oauth2Prometheus(t, prom.URL, token.URL).Fetch(context.Background(), nil)
	require.NoError(t, err)
	assert.Len(t, loads, 1)
	assert.Equal(t, "Bearer tok-123", <-auth)
}

// A token endpoint that redirects elsewhere does not take the client secret
// there: prometheus/common's token client would send it again, in the body
// and the Basic header, to wherever a 307 points.
func TestOAuth2TokenRedirectElsewhereIsRefused(t *testing.T) {
	reached := make(chan struct{}, 4)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached <- struct{}{}
		http.Error(w, "no", http.StatusBadRequest)
	}))
	t.Cleanup(elsewhere.Close)
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/token", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(token.Close)
	prom := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(prom.Close)
	_, err := oauth2Prometheus(t, prom.URL, token.URL).Fetch(context.Background(), nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrUnreachable)
	assert.Contains(t, err.Error(), "not the address of url, proxy_url or oauth2's token_url")
	assert.Empty(t, reached, "the other server got the token request")
}

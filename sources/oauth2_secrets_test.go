package sources

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// An OAuth2 token endpoint that refuses the request and echoes it (x/oauth2
// puts the reply's body in its error): the client secret, a password grant's
// password in endpoint_params and an API key in token_url's query must not
// reach the source's error or log.
func TestOAuth2SecretsNeverLeak(t *testing.T) {
	const (
		clientSecret = "cs-s3cr3t-oauth2"
		grantPass    = "gp-s3cr3t-grant"
		tokenKey     = "tk-s3cr3t-query"
	)
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.QueryUnescape(string(body))
		http.Error(w, "refused: "+r.URL.String()+" "+form+" "+r.Header.Get("Authorization"), http.StatusBadRequest)
	}))
	t.Cleanup(token.Close)
	prom := httptest.NewServer(http.NotFoundHandler()) // never reached: no token
	t.Cleanup(prom.Close)

	cfg := DefaultPrometheusConfig()
	cfg.URL, cfg.Query, cfg.Timeout = prom.URL, "up", duration.Duration(2*time.Second)
	cfg.HTTP.OAuth2 = &promconfig.OAuth2{ClientID: "weighter", ClientSecret: clientSecret,
		TokenURL:       token.URL + "/token?api_key=" + tokenKey,
		EndpointParams: map[string]string{"grant_type": "password", "username": "ops", "password": grantPass}}
	var logs bytes.Buffer
	p, err := NewPrometheus(cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	_, err = p.Fetch(context.Background(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "grant_type=password&", "the token endpoint's answer is shown, what is no secret whole")
	for _, s := range []string{clientSecret, grantPass, tokenKey} {
		assert.NotContains(t, err.Error(), s)
		assert.NotContains(t, logs.String(), s)
	}
}

// A proxy that echoes the request (here it answers as a Prometheus would,
// with the request in its error) gets the proxy_url's password as a
// Proxy-Authorization Basic header: neither may reach the source's error.
func TestProxyPasswordNeverLeaks(t *testing.T) {
	const proxyPass = "px-s3cr3t-proxy"
	proxy := httptest.NewServer(faults("prom-bad-data", nil))
	t.Cleanup(proxy.Close)
	pu, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	pu.User = url.UserPassword("ops", proxyPass)
	cfg := DefaultPrometheusConfig()
	cfg.URL, cfg.Query, cfg.Timeout = "http://prometheus.invalid:9090", "up", duration.Duration(2*time.Second)
	cfg.HTTP.ProxyURL = promconfig.URL{URL: pu}
	p, err := NewPrometheus(cfg, nil)
	require.NoError(t, err)
	_, err = p.Fetch(context.Background(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Proxy-Authorization=Basic REDACTED", "the proxy answered")
	assert.NotContains(t, err.Error(), proxyPass)
	assert.NotContains(t, err.Error(), base64.StdEncoding.EncodeToString([]byte("ops:"+proxyPass)))
}

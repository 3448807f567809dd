package sources

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// echoUser and echoPass are the credentials of the echo tests; echoToken is
// what a Basic Authorization header carries of them.
const (
	echoUser  = "user"
	echoPass  = "s3cret-echo-pw"
	echoToken = "dXNlcjpzM2NyZXQtZWNoby1wdw==" // base64("user:s3cret-echo-pw")
)

// echoSecrets is the echo tests' password in every form a reply may quote it.
var echoSecrets = []string{echoPass, echoToken, url.QueryEscape(echoToken)}

// echoStyles are the ways to give the source the credentials; each sets them
// on the HTTP settings or returns the URL carrying them.
var echoStyles = map[string]func(t *testing.T, base string, h *promconfig.HTTPClientConfig) string{
	"url userinfo": func(_ *testing.T, base string, _ *promconfig.HTTPClientConfig) string {
		u, _ := url.Parse(base)
		u.User = url.UserPassword(echoUser, echoPass)
		return u.String()
	},
	"basic_auth password_file": func(t *testing.T, base string, h *promconfig.HTTPClientConfig) string {
		h.BasicAuth = &promconfig.BasicAuth{Username: echoUser, PasswordFile: secretFile(t, echoPass)}
		return base
	},
	"authorization credentials": func(_ *testing.T, base string, h *promconfig.HTTPClientConfig) string {
		h.Authorization = &promconfig.Authorization{Credentials: echoPass}
		return base
	},
	"authorization credentials_file": func(t *testing.T, base string, h *promconfig.HTTPClientConfig) string {
		h.Authorization = &promconfig.Authorization{CredentialsFile: secretFile(t, echoPass)}
		return base
	},
	"http_headers secret": func(_ *testing.T, base string, h *promconfig.HTTPClientConfig) string {
		h.HTTPHeaders = &promconfig.Headers{Headers: map[string]promconfig.Header{"X-Api-Key": {Secrets: []promconfig.Secret{echoPass}}}}
		return base
	},
}

// TestEchoedCredentialsNeverShow: whatever way the credentials are given,
// a reply quoting what the client sent shows none of them, in any encoding,
// in the source's error or its log; the reply itself is still shown.
func TestEchoedCredentialsNeverShow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(testenv.EchoingProxy))
	t.Cleanup(srv.Close)
	for style, set := range echoStyles {
		for _, kind := range []string{"prometheus", "graphite"} {
			t.Run(kind+"/"+style, func(t *testing.T) {
				var logs bytes.Buffer
				log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				h := promconfig.DefaultHTTPClientConfig
				u := set(t, srv.URL, &h)
				var err error
				if kind == "prometheus" {
					cfg := promAt(u, "up", func(c *PrometheusConfig) { c.HTTP = h })
					p, perr := NewPrometheus(cfg, log)
					require.NoError(t, perr)
					_, err = p.Fetch(context.Background(), nil)
				} else {
					cfg := graphiteAt(u, func(c *GraphiteConfig) { c.HTTP, c.Target, c.Retries = h, "x", 0 })
					g, gerr := NewGraphite(cfg, log)
					require.NoError(t, gerr)
					_, err = g.Fetch(context.Background(), nil)
				}
				require.ErrorIs(t, err, ErrBadReply)
				assert.Contains(t, err.Error(), "502 Bad Gateway", "the reply is shown")
				assert.Contains(t, err.Error(), "REDACTED", "what it quoted of the credentials is replaced")
				testenv.AssertNoSecret(t, "error", err.Error(), echoSecrets...)
				testenv.AssertNoSecret(t, "log", logs.String(), echoSecrets...)
			})
		}
	}
}

// TestEchoedOAuth2TokenNeverShows: the access token an OAuth2 token endpoint
// hands out is in no configuration, yet the client sends it with every
// request: echoed back, it is replaced too.
func TestEchoedOAuth2TokenNeverShows(t *testing.T) {
	const accessToken = "at-s3cret-0123456789"
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": accessToken, "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(token.Close)
	srv := httptest.NewServer(http.HandlerFunc(testenv.EchoingProxy))
	t.Cleanup(srv.Close)
	cfg := promAt(srv.URL, "up", func(c *PrometheusConfig) {
		c.Timeout = duration.Duration(5 * time.Second)
		c.HTTP.OAuth2 = &promconfig.OAuth2{ClientID: "weighter", ClientSecret: "cs-oauth2", TokenURL: token.URL + "/token"}
	})
	p, err := NewPrometheus(cfg, nil)
	require.NoError(t, err)
	_, err = p.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrBadReply)
	assert.Contains(t, err.Error(), "auth=Bearer REDACTED")
	assert.NotContains(t, err.Error(), accessToken)
}

// TestRedactorBasicForms: a Basic credential is hidden as the password, as
// the base64 token (and its URL-escaped form) and as user:pass, whichever
// way it came in.
func TestRedactorBasicForms(t *testing.T) {
	r := newRedactor("http://" + echoUser + ":" + url.PathEscape(echoPass) + "@prometheus:9090")
	text := strings.Join([]string{echoPass, "Basic " + echoToken, url.QueryEscape(echoToken),
		base64.StdEncoding.EncodeToString([]byte(echoUser + ":" + echoPass))}, " ")
	assert.Equal(t, "REDACTED Basic REDACTED REDACTED REDACTED", r.String(text))
}

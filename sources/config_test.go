package sources

import (
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
)

func TestGraphiteConfigValidate(t *testing.T) {
	ok := func() GraphiteConfig {
		c := DefaultGraphiteConfig()
		c.URL, c.Target = "http://graphite:8080", "tcp.*.rx"
		return c
	}
	require.NoError(t, ok().Validate())
	cases := map[string]struct {
		mod  func(*GraphiteConfig)
		want string
	}{
		"no url":       {func(c *GraphiteConfig) { c.URL = "" }, "graphite: url: must be set"},
		"relative url": {func(c *GraphiteConfig) { c.URL = "graphite/render?key=s3cr3t" }, "graphite: url: must be an absolute http or https URL"},
		"no target":    {func(c *GraphiteConfig) { c.Target = " " }, "graphite: target: must be set"},
		"retries":      {func(c *GraphiteConfig) { c.Retries = -1 }, "graphite: retries: -1 not in 0..10"},
		"timeout":      {func(c *GraphiteConfig) { c.Timeout = duration.Duration(-time.Second) }, "graphite: timeout: must not be negative"},
		"regex":        {func(c *GraphiteConfig) { c.ServerRegex = "node" }, `graphite: server_regex: "node" has no capture group`},
		"two auths": {func(c *GraphiteConfig) { c.HTTP.BasicAuth, c.HTTP.BearerToken = basicAuth("u", "p"), "t" },
			"graphite: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured"},
		"half a cert": {func(c *GraphiteConfig) { c.HTTP.TLSConfig.CertFile = "c.pem" },
			"graphite: tls_config: exactly one of key or key_file must be configured when a client certificate is configured"},
		"tls twice": {func(c *GraphiteConfig) {
			c.HTTP.TLSConfig.CAFile, c.Legacy.TLS = "a.pem", &promconfig.TLSConfig{CAFile: "b.pem"}
		},
			"graphite: tls: deprecated spelling of tls_config: set only tls_config"},
		"header twice": {func(c *GraphiteConfig) {
			c.Legacy.Headers = map[string]string{"x-key": "a"}
			c.HTTP.HTTPHeaders = &promconfig.Headers{Headers: map[string]promconfig.Header{"X-Key": {Values: []string{"b"}}}}
		}, "graphite: headers: X-Key is also in http_headers: set it in http_headers only"},
		"reserved header": {func(c *GraphiteConfig) { c.Legacy.Headers = map[string]string{"User-Agent": "x"} },
			`graphite: setting header "User-Agent" is not allowed`},
		"secret manager": {func(c *GraphiteConfig) { c.HTTP.BasicAuth = &promconfig.BasicAuth{Username: "u", PasswordRef: "vault"} },
			"graphite: basic_auth.password_ref: no secret manager here: write the secret in a file (the matching _file key)"},
	}
	for name, c := range cases {
		cfg := ok()
		c.mod(&cfg)
		assert.EqualError(t, cfg.Validate(), c.want, name)
	}
}

func TestPrometheusConfigValidate(t *testing.T) {
	ok := func() PrometheusConfig {
		c := DefaultPrometheusConfig()
		c.URL, c.Query = "https://prometheus:9090", "rate(rx_total[1m])"
		return c
	}
	require.NoError(t, ok().Validate())
	cases := map[string]struct {
		mod  func(*PrometheusConfig)
		want string
	}{
		"no query":      {func(c *PrometheusConfig) { c.Query = "" }, "prometheus: query: must be set"},
		"bad label":     {func(c *PrometheusConfig) { c.ServerLabel = "\xff" }, `prometheus: server_label: "\xff" is not a valid label name`},
		"step alone":    {func(c *PrometheusConfig) { c.Step = duration.Duration(time.Second) }, "prometheus: step: only valid with range"},
		"range no step": {func(c *PrometheusConfig) { c.Range = duration.Duration(time.Minute) }, "prometheus: step: must be > 0 with range"},
		"step > range": {func(c *PrometheusConfig) {
			c.Range, c.Step = duration.Duration(time.Minute), duration.Duration(time.Hour)
		}, "prometheus: step: must not exceed range"},
		"too many steps": {func(c *PrometheusConfig) {
			c.Range, c.Step = duration.Duration(24*time.Hour), duration.Duration(time.Second)
		}, "prometheus: step: range/step must be at most 11000 points"},
		"negative range": {func(c *PrometheusConfig) { c.Range = duration.Duration(-time.Minute) }, "prometheus: range: must not be negative"},
		"ftp url":        {func(c *PrometheusConfig) { c.URL = "ftp://p" }, "prometheus: url: must be an absolute http or https URL"},
	}
	for name, c := range cases {
		cfg := ok()
		c.mod(&cfg)
		assert.EqualError(t, cfg.Validate(), c.want, name)
	}
}

func TestConstructorsFillDefaults(t *testing.T) {
	g, err := NewGraphite(GraphiteConfig{URL: "http://g", Target: "a.*", HTTP: promconfig.DefaultHTTPClientConfig}, nil)
	require.NoError(t, err)
	assert.Equal(t, "http://g/render?format=json&from=-5min&target=a.%2A", g.render.String())
	p, err := NewPrometheus(PrometheusConfig{URL: "http://p", Query: "up", HTTP: promconfig.DefaultHTTPClientConfig}, nil)
	require.NoError(t, err)
	assert.Equal(t, "server", p.cfg.ServerLabel)
	assert.Equal(t, duration.Duration(5*time.Second), p.cfg.Timeout)
}

func TestTLSFilesErrors(t *testing.T) {
	cfg := graphiteAt("https://g", func(c *GraphiteConfig) { c.Target, c.HTTP.TLSConfig.CAFile = "a", "/nonexistent/ca.pem" })
	_, err := NewGraphite(cfg, nil)
	assert.ErrorContains(t, err, "graphite: unable to read CA cert: unable to read file /nonexistent/ca.pem")
}

// TestLegacyKeysAreNamed: each key of earlier releases set is reported
// once, with what replaces it; the new schema alone reports nothing.
func TestLegacyKeysAreNamed(t *testing.T) {
	c := DefaultPrometheusConfig()
	c.HTTP.BasicAuth = basicAuth("u", "p") // same key and meaning as before: not deprecated
	c.HTTP.TLSConfig.CAFile = "ca.pem"
	assert.Empty(t, c.Legacy.Deprecated(c.HTTP))
	c.HTTP = promconfig.DefaultHTTPClientConfig
	c.HTTP.BearerToken = "t"
	c.Legacy = LegacyHTTP{TLS: &promconfig.TLSConfig{}, Headers: map[string]string{}}
	got := c.Legacy.Deprecated(c.HTTP)
	require.Len(t, got, 3)
	assert.EqualError(t, got[0], "tls: deprecated, write tls_config (same keys)")
	assert.ErrorContains(t, got[1], "headers: deprecated, write http_headers")
	assert.EqualError(t, got[2], "bearer_token: deprecated, write authorization: {credentials: ...}")
	for i, key := range []string{"tls", "headers", "bearer_token"} {
		assert.Equal(t, []string{key}, field.Keys(got[i]), "the key, as a value")
	}
	// Mapping leaves the decoded configuration as it was.
	h, err := c.Legacy.resolve(c.HTTP)
	require.NoError(t, err)
	assert.Equal(t, promconfig.Secret("t"), c.HTTP.BearerToken)
	assert.Equal(t, promconfig.Secret("t"), h.Authorization.Credentials)
	assert.Empty(t, h.BearerToken)
}

// TestLegacyAuthorizationHeader: an Authorization header, which http_headers
// refuses, becomes authorization: {type, credentials}.
func TestLegacyAuthorizationHeader(t *testing.T) {
	h, err := LegacyHTTP{Headers: map[string]string{"authorization": "Token abc", "X-Scope-OrgID": "1", "X-Token": "t"}}.
		resolve(promconfig.DefaultHTTPClientConfig)
	require.NoError(t, err)
	assert.Equal(t, &promconfig.Authorization{Type: "Token", Credentials: "abc"}, h.Authorization)
	assert.Equal(t, promconfig.Header{Values: []string{"1"}}, h.HTTPHeaders.Headers["X-Scope-Orgid"])
	assert.Equal(t, promconfig.Header{Secrets: []promconfig.Secret{"t"}}, h.HTTPHeaders.Headers["X-Token"])
	_, err = LegacyHTTP{Headers: map[string]string{"Authorization": "Token abc"}}.
		resolve(promconfig.HTTPClientConfig{BasicAuth: basicAuth("u", "p")})
	assert.ErrorContains(t, err, "headers: Authorization: write authorization: {type: ..., credentials: ...} instead")
}

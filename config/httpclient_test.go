package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/sources"
)

// The sources' HTTP settings are Prometheus' own schema, written inline as
// in a scrape config; their relative paths are relative to the file's
// directory, as in Prometheus, and the keys of earlier releases load with a
// warning at their line.
func TestHTTPClientSettingsLoad(t *testing.T) {
	data := `backends:
  - name: be
    source:
      prometheus:
        url: https://127.0.0.1:9090
        query: up
        basic_auth: {username: u, password_file: secrets/pw}
        tls_config: {ca_file: /etc/ssl/ca.pem, server_name: prom}
        follow_redirects: false
        http_headers:
          X-Scope-OrgID: {values: ["1"]}
  - name: be2
    source:
      graphite:
        url: http://127.0.0.1:8080
        target: a.*
        bearer_token_file: tok
        tls: {ca_file: ca.pem}
`
	cfg, err := Parse("/etc/haproxy-weighter/config.yaml", []byte(data), noEnv)
	require.NoError(t, err)
	prom := cfg.Backends[0].Source.Config().(*sources.PrometheusConfig).HTTP
	assert.Equal(t, "/etc/haproxy-weighter/secrets/pw", prom.BasicAuth.PasswordFile)
	assert.Equal(t, "/etc/ssl/ca.pem", prom.TLSConfig.CAFile)
	assert.Equal(t, "prom", prom.TLSConfig.ServerName)
	assert.False(t, prom.FollowRedirects)
	assert.True(t, prom.EnableHTTP2, "Prometheus' default for a key not written")
	graphite := cfg.Backends[1].Source.Config().(*sources.GraphiteConfig)
	assert.Equal(t, "/etc/haproxy-weighter/tok", graphite.HTTP.BearerTokenFile)
	assert.Equal(t, "ca.pem", graphite.Legacy.TLS.CAFile, "the deprecated tls keeps its paths as they were")
	assert.True(t, graphite.HTTP.FollowRedirects)
	assert.Equal(t, []string{
		"/etc/haproxy-weighter/config.yaml:17: warning: backends[1] (be2): source: graphite: bearer_token_file: deprecated, write authorization: {credentials_file: ...}",
		"/etc/haproxy-weighter/config.yaml:18: warning: backends[1] (be2): source: graphite: tls: deprecated, write tls_config (same keys)",
	}, cfg.Warnings)

	_, err = Parse("c.yml", []byte("backends:\n  - name: be\n    source:\n      prometheus:\n        url: http://p\n        query: up\n"+
		"        basic_auth: {username: u, password: a, password_file: b}\n"), noEnv)
	assert.EqualError(t, err, "c.yml:4: backends[0] (be): source: prometheus: at most one of basic_auth password, password_file & password_ref must be configured")
	_, err = Parse("c.yml", []byte("backends:\n  - name: be\n    source:\n      prometheus:\n        url: http://p\n        query: up\n"+
		"        basic_auth: {username: u, pasword: a}\n"), noEnv)
	assert.EqualError(t, err, `c.yml:7: unknown key "pasword"`)
}

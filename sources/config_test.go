package sources

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
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
		"no url":        {func(c *GraphiteConfig) { c.URL = "" }, "graphite: url: must be set"},
		"relative url":  {func(c *GraphiteConfig) { c.URL = "graphite/render?key=s3cr3t" }, "graphite: url: must be an absolute http or https URL"},
		"no target":     {func(c *GraphiteConfig) { c.Target = " " }, "graphite: target: must be set"},
		"retries":       {func(c *GraphiteConfig) { c.Retries = -1 }, "graphite: retries: -1 not in 0..10"},
		"timeout":       {func(c *GraphiteConfig) { c.Timeout = duration.Duration(-time.Second) }, "graphite: timeout: must not be negative"},
		"regex":         {func(c *GraphiteConfig) { c.ServerRegex = "node" }, `graphite: server_regex: "node" has no capture group`},
		"two auths":     {func(c *GraphiteConfig) { c.BasicAuth.Username, c.BearerToken = "u", "t" }, "graphite: basic_auth and bearer_token are mutually exclusive"},
		"password only": {func(c *GraphiteConfig) { c.BasicAuth.Password = "p" }, "graphite: basic_auth: username must be set with password"},
		"half a cert":   {func(c *GraphiteConfig) { c.TLS.CertFile = "c.pem" }, "graphite: tls: cert_file and key_file must be set together"},
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
	g, err := NewGraphite(GraphiteConfig{URL: "http://g", Target: "a.*"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "http://g/render?format=json&from=-5min&target=a.%2A", g.render.String())
	p, err := NewPrometheus(PrometheusConfig{URL: "http://p", Query: "up"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "server", p.cfg.ServerLabel)
	assert.Equal(t, duration.Duration(5*time.Second), p.cfg.Timeout)
}

func TestTLSFilesErrors(t *testing.T) {
	cfg := GraphiteConfig{URL: "https://g", Target: "a", TLS: TLSConfig{CAFile: "/nonexistent/ca.pem"}}
	_, err := NewGraphite(cfg, nil)
	assert.ErrorContains(t, err, "graphite: tls: ca_file: open /nonexistent/ca.pem")
}

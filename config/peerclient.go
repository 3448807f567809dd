package config

import (
	"fmt"

	promconfig "github.com/prometheus/common/config"

	"github.com/haproxy-weighter/haproxy-weighter/sources"
)

// PeerClient is peer_client: how this daemon asks its peers for their
// readings, in Prometheus' http_config schema as the HTTP sources take it
// (basic_auth, tls_config, proxy_url, ...). One block serves every peer: the
// balancers of one fleet protect their listeners alike (web_config_file).
// A separate key, so that peers stays a plain list of URLs.
type PeerClient struct {
	HTTP promconfig.HTTPClientConfig `yaml:",inline"`
}

// DefaultPeerClient is Prometheus' client defaults (follow_redirects,
// enable_http2): no credentials, the system's CAs, no proxy.
func DefaultPeerClient() PeerClient {
	return PeerClient{HTTP: promconfig.DefaultHTTPClientConfig}
}

// validatePeerClient checks peer_client as a source's HTTP settings are
// checked; each problem is at its key under peer_client.
func (c *Config) validatePeerClient() []*FieldError {
	var problems []*FieldError
	for _, p := range keyed(sources.CheckHTTPClientConfig(c.PeerClient.HTTP), "peer_client") {
		p.Err = fmt.Errorf("peer_client: %w", p.Err)
		problems = append(problems, p)
	}
	return problems
}

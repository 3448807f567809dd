package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	promconfig "github.com/prometheus/common/config"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
)

// The peers are asked with the HTTP sources' client, from peer_client
// (Prometheus' http_config): a fleet whose listeners take TLS and basic
// auth from web_config_file (the same listener serves PeerPath) gives its
// daemons the CA and the credentials there. Like the sources', the client
// takes no proxy from the environment unless proxy_from_environment says
// so (a daemon's HTTP_PROXY is for the Internet, not its neighbours), and
// follows redirects only within the peer's origin, credentials included.

// newPeerClient builds the client asking the peer at url, each of its dials
// and reads bounded by timeout (the ask's). credentials says whether it
// sends any; a client that cannot be built is left out with err's reason.
func newPeerClient(url string, h promconfig.HTTPClientConfig, timeout time.Duration) (c *sources.HTTPClient, credentials bool, err error) {
	credentials = h.BasicAuth != nil || h.Authorization != nil || h.OAuth2 != nil || h.BearerToken != "" ||
		h.BearerTokenFile != "" || h.TLSConfig.CertFile != "" || h.TLSConfig.Cert != ""
	c, err = sources.NewHTTPClient("peer_client", url, h, timeout)
	if err != nil {
		return nil, credentials, fmt.Errorf("client: %w", err)
	}
	return c, credentials, nil
}

// CheckPeerClient builds the client of every peer as run does, contacting
// none, so that what only building checks fails validate, the start and a
// reload rather than every ask.
func CheckPeerClient(cfg *config.Config) error {
	var problems []error
	for _, u := range cfg.Peers {
		c, _, err := newPeerClient(u, cfg.PeerClient.HTTP, time.Second)
		if err != nil {
			problems = append(problems, fmt.Errorf("peer %s: %w", u, err))
			continue
		}
		c.CloseIdleConnections()
	}
	return errors.Join(problems...)
}

// useClient sets how the peers are asked; the next set restarts the
// pollers when it changed.
func (p *peerSet) useClient(h promconfig.HTTPClientConfig) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.client = h
}

// stop ends the peer's poller and lets go of its connections.
func (pr *peer) stop() {
	pr.cancel()
	<-pr.done
	if pr.client != nil {
		pr.client.CloseIdleConnections()
	}
}

// refusedWhy completes a 401 or 403: the peer's web_config_file asks for
// credentials this daemon did not send, or refused those it sent.
func (pr *peer) refusedWhy(status int) string {
	switch {
	case status != http.StatusUnauthorized && status != http.StatusForbidden:
		return ""
	case pr.credentials:
		return ": the peer refused peer_client's credentials"
	}
	return ": the peer asks for credentials (its web_config_file): set them in peer_client"
}

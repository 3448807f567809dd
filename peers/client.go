package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	promconfig "github.com/prometheus/common/config"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
)

// The peers are asked with the HTTP sources' client, from peer_client
// (Prometheus' http_config): a fleet whose listeners take TLS and basic
// auth from web_config_file (the same listener serves Path) gives its
// daemons the CA and the credentials there. Like the sources', the client
// takes no proxy from the environment unless proxy_from_environment says
// so (a daemon's HTTP_PROXY is for the Internet, not its neighbours), and
// follows redirects only within the peer's origin, credentials included.

// newClient builds the client asking the peer at url, each of its dials and
// reads bounded by timeout (the ask's). credentials says whether it sends
// any; a client that cannot be built is left out with err's reason.
func newClient(url string, h promconfig.HTTPClientConfig, timeout time.Duration) (c *sources.HTTPClient, credentials bool, err error) {
	credentials = h.BasicAuth != nil || h.Authorization != nil || h.OAuth2 != nil || h.BearerToken != "" ||
		h.BearerTokenFile != "" || h.TLSConfig.CertFile != "" || h.TLSConfig.Cert != ""
	c, err = sources.NewHTTPClient("peer_client", url, h, timeout, maxBody)
	if err != nil {
		return nil, credentials, fmt.Errorf("client: %w", err)
	}
	return c, credentials, nil
}

// CheckClient builds the client of every peer as the pollers do, contacting
// none, so that what only building checks fails validate, the start and a
// reload rather than every ask.
func CheckClient(cfg *config.Config) error {
	var problems []error
	for _, u := range cfg.Peers {
		c, _, err := newClient(u, cfg.PeerClient.HTTP, time.Second)
		if err != nil {
			problems = append(problems, fmt.Errorf("peer %s: %w", u, err))
			continue
		}
		c.CloseIdleConnections()
	}
	return errors.Join(problems...)
}

// UseClient sets how the peers are asked; the next Poll restarts the
// pollers when it changed.
func (p *Set) UseClient(h promconfig.HTTPClientConfig) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.client = h
}

// ask GETs the peer's Path within timeout and checks the answer.
func (p *Set) ask(ctx context.Context, pr *peer, timeout time.Duration) (*answer, error) {
	if pr.client == nil {
		return nil, pr.broken
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(pr.url, "/")+Path, nil)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	resp, err := pr.client.Do(req)
	if err != nil {
		if timedOut(err) {
			return nil, fmt.Errorf("down: no answer within %s", timeout)
		}
		return nil, fmt.Errorf("down: %w", pr.client.Redact(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("down: HTTP %s%s", resp.Status, pr.refusedWhy(resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	switch {
	case timedOut(err):
		return nil, fmt.Errorf("down: answer not read within %s", timeout)
	case errors.Is(err, sources.ErrTooLarge):
		return nil, fmt.Errorf("garbage: an answer over %d MiB", maxBody>>20)
	case err != nil:
		return nil, fmt.Errorf("down: reading the answer: %w", pr.client.Redact(err))
	case len(body) > maxBody:
		return nil, fmt.Errorf("garbage: an answer over %d MiB", maxBody>>20)
	}
	var a answer
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&a); err != nil {
		return nil, fmt.Errorf("garbage: %w", err)
	}
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("garbage: %w", err)
	}
	return &a, nil
}

// timedOut reports whether err is the ask's deadline or its connection's
// read deadline (both the ask's timeout): whichever comes first, the peer
// is said alike, not once in each wording.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
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

// stop ends the peer's poller and lets go of its connections.
func (pr *peer) stop() {
	pr.cancel()
	<-pr.done
	if pr.client != nil {
		pr.client.CloseIdleConnections()
	}
}

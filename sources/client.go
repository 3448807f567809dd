package sources

import (
	"net/http"
	"time"

	promconfig "github.com/prometheus/common/config"
)

// The sources' HTTP client, for the daemon's other HTTP clients (its peers):
// one schema (Prometheus' http_config), one set of checks and one client
// with the same bounds, rather than a second TLS and auth code path.

// CheckHTTPClientConfig checks h as a source's HTTP settings are checked:
// Prometheus' own Validate, tls_config's, and no *_ref keys (there is no
// secret manager here). Its problems name their keys (internal/field).
func CheckHTTPClientConfig(h promconfig.HTTPClientConfig) error {
	_, err := LegacyHTTP{}.resolve(h)
	return err
}

// HTTPClient is a client of one URL, built as a source's: prometheus/common's
// client from h (secret and TLS files read at each request; a proxy only
// from proxy_url, or from the environment with proxy_from_environment),
// replies bounded, redirects followed only within the URL's origin, dials
// only to the URL's (or the proxy's) address, no dial or read waiting
// longer than the timeout.
type HTTPClient struct {
	*http.Client
	red *redactor
}

// NewHTTPClient builds the client of rawURL; name labels its connections
// and prefixes its errors. Its errors show no secret. A reply longer than
// maxReply bytes (0: the sources' 32 MiB) fails with ErrTooLarge before it
// is held in memory.
func NewHTTPClient(name, rawURL string, h promconfig.HTTPClientConfig, timeout time.Duration, maxReply int64) (*HTTPClient, error) {
	_, red, client, err := connect(name, rawURL, h, LegacyHTTP{}, timeout)
	if err != nil {
		return nil, err
	}
	if lt, ok := client.Transport.(*limitTransport); ok {
		lt.limit = maxReply
	}
	return &HTTPClient{Client: client, red: red}, nil
}

// Redact returns err with the client's secrets replaced: those written in
// its settings and those its secret files hold now (it read them for the
// request that failed). nil stays nil.
func (c *HTTPClient) Redact(err error) error {
	if err == nil {
		return nil
	}
	c.red.refresh()
	return c.red.Error(err)
}

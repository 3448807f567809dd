package sources

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// BasicAuth is HTTP basic authentication. An empty Username means none.
type BasicAuth struct {
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

// TLSConfig configures HTTPS to a source.
type TLSConfig struct {
	CAFile             string `yaml:"ca_file"`   // PEM bundle to trust instead of the system roots
	CertFile           string `yaml:"cert_file"` // client certificate (PEM), with KeyFile
	KeyFile            string `yaml:"key_file"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// Validate checks that client certificate and key come as a pair.
func (c TLSConfig) Validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("tls: cert_file and key_file must be set together")
	}
	return nil
}

// httpOptions is what Graphite and Prometheus share to build their HTTP client.
type httpOptions struct {
	basic   BasicAuth
	bearer  string
	headers map[string]string
	tls     TLSConfig
	timeout time.Duration
}

// validateAuth rejects ambiguous authentication settings.
func validateAuth(b BasicAuth, bearer string) error {
	if b.Username != "" && bearer != "" {
		return errors.New("basic_auth and bearer_token are mutually exclusive")
	}
	if b.Username == "" && b.Password != "" {
		return errors.New("basic_auth: username must be set with password")
	}
	return nil
}

// transport builds the round tripper: TLS, then authentication headers on every
// request to origin (see authTransport).
func (o httpOptions) transport(origin string) (http.RoundTripper, error) {
	tc, err := o.tls.build()
	if err != nil {
		return nil, err
	}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: o.timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   o.timeout,
		ResponseHeaderTimeout: o.timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
	}
	return &authTransport{next: t, opts: o, origin: origin}, nil
}

func (c TLSConfig) build() (*tls.Config, error) {
	tc := &tls.Config{InsecureSkipVerify: c.InsecureSkipVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // operator's choice
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: ca_file %s: no PEM certificate found", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// errRedirect marks a redirect to another origin, which is not followed.
var errRedirect = errors.New("not followed: credentials go to the configured url only; set url to the final address")

// authTransport adds credentials and custom headers to each request, and sends
// requests only to the configured origin. The check lives here because the
// headers are added here, below http.Client: its own stripping of Authorization
// on a redirect to another host cannot see them, so a redirect elsewhere would
// carry every credential, and a Referer with the URL's API key, to that host.
type authTransport struct {
	next   http.RoundTripper
	opts   httpOptions
	origin string // scheme://host:port of the configured URL
}

func (a *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if o := origin(req.URL); o != a.origin {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, fmt.Errorf("redirected to %s: %w", o, errRedirect)
	}
	req = req.Clone(req.Context())
	for k, v := range a.opts.headers {
		req.Header.Set(k, v)
	}
	switch {
	case a.opts.basic.Username != "":
		req.SetBasicAuth(a.opts.basic.Username, a.opts.basic.Password)
	case a.opts.bearer != "":
		req.Header.Set("Authorization", "Bearer "+a.opts.bearer)
	}
	resp, err := a.next.RoundTrip(req)
	if err == nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxBody}
	}
	return resp, err
}

// maxBody bounds what we read of a reply: a render or query of a few hundred
// servers is far smaller, and one that matches a whole fleet (a missing filter
// or aggregation) must not fill the balancer's memory. Prometheus' own client
// reads a reply whole, hence the limit here, below both sources.
const maxBody = 32 << 20

// errTooLarge ends the read of a reply longer than maxBody.
var errTooLarge = fmt.Errorf("reply larger than %d MiB, not read: narrow the query or target", maxBody>>20)

// limitedBody reads at most left bytes, then fails with errTooLarge if more
// come, rather than cutting the reply short in silence.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, errTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// secrets lists the configured credentials, for the redactor.
func (o httpOptions) secrets() []string {
	s := []string{o.basic.Password, o.bearer}
	if o.basic.Username != "" { // what an echoing server would show of the password
		s = append(s, base64.StdEncoding.EncodeToString([]byte(o.basic.Username+":"+o.basic.Password)))
	}
	for name, v := range o.headers {
		if mayBeSecret(name, v) {
			s = append(s, v)
		}
	}
	return s
}

// connect builds what every HTTP source needs from its options: the transport
// (auth, headers, TLS, timeout) and the redactor that keeps the secrets out of
// errors and logs. source names the source in the error.
func (o httpOptions) connect(source, rawURL string) (http.RoundTripper, *redactor, error) {
	red := newRedactor(rawURL, o.secrets()...)
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: url: %w", source, red.Error(err))
	}
	rt, err := o.transport(origin(u))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", source, red.Error(err))
	}
	return rt, red, nil
}

// origin is u's scheme, host and port (the scheme's default when absent), in
// lower case, for telling a redirect to another server from one within the source.
func origin(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// orDiscard returns log, or a logger that drops everything when log is nil.
func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

package sources

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	promconfig "github.com/prometheus/common/config"

	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
)

// LegacyHTTP holds the HTTP keys of earlier releases, which Prometheus'
// schema (HTTPClientConfig) replaces. They still work, mapped onto it, with a
// deprecation warning at load; bearer_token, which Prometheus itself still
// reads, is mapped by HTTPClientConfig.
type LegacyHTTP struct {
	// TLS is tls_config under its old name; it takes the same keys. Its
	// relative paths stay relative to the working directory, as they were.
	TLS *promconfig.TLSConfig `yaml:"tls"`
	// Headers are sent with every request: http_headers with one value each.
	Headers map[string]string `yaml:"headers"`
}

// Deprecated lists the deprecated keys set in h and legacy, each as
// "key: deprecated, ..." naming what replaces it.
func (l LegacyHTTP) Deprecated(h promconfig.HTTPClientConfig) []error {
	var out []error
	if l.TLS != nil {
		out = append(out, field.Errorf("tls", "tls: deprecated, write tls_config (same keys)"))
	}
	if l.Headers != nil {
		out = append(out, field.Errorf("headers", "headers: deprecated, write http_headers: {Name: {values: [...]}} (or secrets: or files: for a credential)"))
	}
	if h.BearerToken != "" {
		out = append(out, field.Errorf("bearer_token", "bearer_token: deprecated, write authorization: {credentials: ...}"))
	}
	if h.BearerTokenFile != "" {
		out = append(out, field.Errorf("bearer_token_file", "bearer_token_file: deprecated, write authorization: {credentials_file: ...}"))
	}
	return out
}

// resolve returns h with the legacy keys mapped onto it and checked by
// HTTPClientConfig's own Validate. h is not changed: Validate rewrites what
// it checks (bearer_token becomes authorization), so it works on a copy.
func (l LegacyHTTP) resolve(h promconfig.HTTPClientConfig) (promconfig.HTTPClientConfig, error) {
	h = cloneHTTP(h)
	if err := noRefs(h); err != nil {
		return h, err
	}
	if l.TLS != nil {
		if h.TLSConfig != (promconfig.TLSConfig{}) {
			return h, field.Errorf("tls", "tls: deprecated spelling of tls_config: set only tls_config")
		}
		h.TLSConfig = *l.TLS
	}
	if err := l.mapHeaders(&h); err != nil {
		return h, err
	}
	if err := h.Validate(); err != nil {
		return h, err
	}
	// HTTPClientConfig's Validate leaves tls_config to its decoding, which
	// a configuration built in code has not been through.
	if err := h.TLSConfig.Validate(); err != nil {
		return h, field.Wrap(fmt.Errorf("tls_config: %w", err), "tls_config")
	}
	return h, nil
}

// mapHeaders moves the old headers into http_headers: a value that may be a
// credential (mayBeSecret) as a secret, which Prometheus' schema never shows,
// others as plain values. Authorization, which http_headers refuses, becomes
// authorization: {type, credentials}.
func (l LegacyHTTP) mapHeaders(h *promconfig.HTTPClientConfig) error {
	if len(l.Headers) == 0 {
		return nil
	}
	if h.HTTPHeaders == nil {
		h.HTTPHeaders = &promconfig.Headers{}
	}
	if h.HTTPHeaders.Headers == nil {
		h.HTTPHeaders.Headers = map[string]promconfig.Header{}
	}
	for _, name := range slices.Sorted(maps.Keys(l.Headers)) {
		value := l.Headers[name]
		canon := http.CanonicalHeaderKey(name)
		if canon == "Authorization" {
			typ, cred, ok := strings.Cut(strings.TrimSpace(value), " ")
			if !ok || h.Authorization != nil || h.BasicAuth != nil || h.OAuth2 != nil || h.BearerToken != "" || h.BearerTokenFile != "" {
				return field.Errorf("headers", "headers: Authorization: write authorization: {type: ..., credentials: ...} instead, and only one way to authenticate")
			}
			h.Authorization = &promconfig.Authorization{Type: typ, Credentials: promconfig.Secret(strings.TrimSpace(cred))}
			continue
		}
		for other := range h.HTTPHeaders.Headers {
			if http.CanonicalHeaderKey(other) == canon {
				return field.Errorf("headers", "headers: %s is also in http_headers: set it in http_headers only", canon)
			}
		}
		var hdr promconfig.Header
		if mayBeSecret(name, value) {
			hdr.Secrets = []promconfig.Secret{promconfig.Secret(value)}
		} else {
			hdr.Values = []string{value}
		}
		h.HTTPHeaders.Headers[canon] = hdr
	}
	return nil
}

// noRefs refuses the *_ref keys: they name secrets in a secret manager,
// which Prometheus has and this daemon does not.
func noRefs(h promconfig.HTTPClientConfig) error {
	refs := map[string]string{"tls_config.ca_ref": h.TLSConfig.CARef, "tls_config.cert_ref": h.TLSConfig.CertRef, "tls_config.key_ref": h.TLSConfig.KeyRef}
	if b := h.BasicAuth; b != nil {
		refs["basic_auth.username_ref"], refs["basic_auth.password_ref"] = b.UsernameRef, b.PasswordRef
	}
	if a := h.Authorization; a != nil {
		refs["authorization.credentials_ref"] = a.CredentialsRef
	}
	if o := h.OAuth2; o != nil {
		refs["oauth2.client_secret_ref"], refs["oauth2.client_certificate_key_ref"] = o.ClientSecretRef, o.ClientCertificateKeyRef
	}
	for _, k := range slices.Sorted(maps.Keys(refs)) {
		if refs[k] != "" {
			return fmt.Errorf("%s: no secret manager here: write the secret in a file (the matching _file key)", k)
		}
	}
	return nil
}

// cloneHTTP copies what resolve and Validate change, so that the
// configuration they were given stays as it was decoded.
func cloneHTTP(h promconfig.HTTPClientConfig) promconfig.HTTPClientConfig {
	if h.BasicAuth != nil {
		b := *h.BasicAuth
		h.BasicAuth = &b
	}
	if h.Authorization != nil {
		a := *h.Authorization
		h.Authorization = &a
	}
	if h.OAuth2 != nil {
		o := *h.OAuth2
		h.OAuth2 = &o
	}
	if h.HTTPHeaders != nil {
		h.HTTPHeaders = &promconfig.Headers{Headers: maps.Clone(h.HTTPHeaders.Headers)}
	}
	return h
}

// newHTTPClient builds a source's client with prometheus/common's
// NewClientFromConfig, which reads secret files (password_file,
// credentials_file, TLS files) at each request, so that a rotated secret
// takes effect without a restart. On top of it: the credentials each
// request carries go to red (noteTransport), replies are bounded
// (limitTransport), redirects follow redirectPolicy, and no read waits
// longer than timeout (boundedDial). name labels the client's connections.
func newHTTPClient(name string, h promconfig.HTTPClientConfig, u *url.URL, timeout time.Duration, red *redactor) (*http.Client, error) {
	client, err := promconfig.NewClientFromConfig(h, name, promconfig.WithIdleConnTimeout(90*time.Second),
		promconfig.WithDialContextFunc(boundedDial(timeout, dialTargets(h, u))))
	if err != nil {
		return nil, err
	}
	client.Transport = &limitTransport{next: &noteTransport{next: client.Transport, red: red}}
	client.CheckRedirect = redirectPolicy(origin(u), h.FollowRedirects)
	return client, nil
}

// boundedDial dials connections on which no dial or read waits longer than
// timeout, to the addresses targets lists (dialTargets). prometheus/common
// asks an OAuth2 token endpoint without the request's context and without a
// timeout: one that accepts and never answers would hold the source's
// fetch, and its cycle, for ever.
func boundedDial(timeout time.Duration, targets map[string]bool) promconfig.DialContextFunc {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := checkDialTarget(targets, addr); err != nil {
			return nil, err
		}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &readDeadlineConn{Conn: c, timeout: timeout}, nil
	}
}

// readDeadlineConn sets each read's deadline timeout ahead. An idle
// keep-alive connection is dropped after timeout (the next request dials
// again), which a cycle shorter than the timeout never sees.
type readDeadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *readDeadlineConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// errRedirect marks a redirect that is not followed.
var errRedirect = errors.New("not followed")

// redirectPolicy follows a redirect only with follow_redirects (the default)
// and only within the configured origin. A redirect to another origin is
// refused whatever follow_redirects says: prometheus/common strips the
// credentials there, but not the http_headers (an API key header), and
// net/http would send the URL, with any API key in it, as the Referer.
func redirectPolicy(want string, follow bool) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		switch o := origin(req.URL); {
		case !follow:
			return fmt.Errorf("redirect to %s: %w (follow_redirects: false)", o+req.URL.Path, errRedirect)
		case o != want:
			return fmt.Errorf("redirected to %s: %w: credentials go to the configured url only; set url to the final address", o, errRedirect)
		case len(via) >= 10:
			return fmt.Errorf("%d redirects: %w", len(via), errRedirect)
		}
		req.Header.Del("Referer")
		return nil
	}
}

// origin is u's scheme, host and port (the scheme's default when absent), in
// lower case, for telling a redirect to another server from one within the source.
func origin(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + hostPort(u)
}

// httpSecrets lists what the redactor must hide of h (resolved): the inline
// secrets, and a function that reads the secret files as they are now, since
// the client reads them at each request.
func httpSecrets(h promconfig.HTTPClientConfig) (inline []string, files func() []string) {
	var paths []string
	username := ""
	password := ""
	if b := h.BasicAuth; b != nil {
		username, password = b.Username, string(b.Password)
		inline = append(inline, password)
		paths = append(paths, b.PasswordFile)
	}
	if a := h.Authorization; a != nil {
		inline = append(inline, string(a.Credentials))
		paths = append(paths, a.CredentialsFile)
	}
	if o := h.OAuth2; o != nil {
		inline = append(inline, oauth2Secrets(o)...)
		paths = append(paths, o.ClientSecretFile, o.ClientCertificateKeyFile)
	}
	if h.HTTPHeaders != nil {
		for _, hdr := range h.HTTPHeaders.Headers {
			for _, s := range hdr.Secrets {
				inline = append(inline, string(s))
			}
			paths = append(paths, hdr.Files...)
		}
	}
	inline = append(inline, proxySecrets(h.ProxyConfig)...)
	inline = append(inline, string(h.TLSConfig.Key))
	if username != "" && password != "" { // what an echoing server would show of the password
		inline = append(inline, basicToken(username, password))
	}
	var userFile, passFile string
	if b := h.BasicAuth; b != nil {
		userFile, passFile = b.UsernameFile, b.PasswordFile
	}
	return inline, func() []string {
		var out []string
		for _, p := range paths {
			if s := readSecretFile(p); s != "" {
				out = append(out, s)
			}
		}
		if userFile != "" || passFile != "" {
			user, pass := username, password
			if userFile != "" {
				user = readSecretFile(userFile)
			}
			if passFile != "" {
				pass = readSecretFile(passFile)
			}
			out = append(out, basicToken(user, pass))
		}
		return out
	}
}

// proxySecrets are the proxy's password, as written and as the
// Proxy-Authorization header net/http sends, and its CONNECT headers.
func proxySecrets(p promconfig.ProxyConfig) []string {
	var out []string
	for _, vs := range p.ProxyConnectHeader {
		for _, s := range vs {
			out = append(out, string(s))
		}
	}
	if u := p.ProxyURL.URL; u != nil && u.User != nil {
		if pass, ok := u.User.Password(); ok {
			out = append(out, pass, basicToken(u.User.Username(), pass))
		}
	}
	return out
}

// oauth2Secrets are what an OAuth2 token endpoint's error (x/oauth2 quotes
// its reply's body), or its URL, may show: the client secret and its Basic
// header, endpoint_params that may be credentials (a password grant's),
// token_url's keys, and the token request's own proxy and TLS key.
func oauth2Secrets(o *promconfig.OAuth2) []string {
	out := []string{string(o.ClientSecret), string(o.ClientCertificateKey), string(o.TLSConfig.Key)}
	if o.ClientSecret != "" {
		out = append(out, basicToken(url.QueryEscape(o.ClientID), url.QueryEscape(string(o.ClientSecret))))
	}
	for name, v := range o.EndpointParams { // by name: grant_type's "password" is no secret
		if secretName(name) {
			out = append(out, v)
		}
	}
	out = append(out, newRedactor(o.TokenURL).secrets...)
	return append(out, proxySecrets(o.ProxyConfig)...)
}

// readSecretFile reads a secret as prometheus/common does (trimmed); "" when
// it cannot be read, which the request itself then reports.
func readSecretFile(path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func basicToken(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// orDiscard returns log, or a logger that drops everything when log is nil.
func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// connect builds what every HTTP source needs from its settings: the parsed
// URL, the redactor that keeps the secrets out of errors and logs, and the
// client. source names the source in the error.
func connect(source, rawURL string, h promconfig.HTTPClientConfig, legacy LegacyHTTP, timeout time.Duration) (*url.URL, *redactor, *http.Client, error) {
	red := newRedactor(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: url: %w", source, red.Error(err))
	}
	h, err = legacy.resolve(h)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", source, red.Error(err))
	}
	inline, current := httpSecrets(h)
	for _, s := range inline {
		red.add(s)
	}
	red.current = current
	red.refresh()
	client, err := newHTTPClient(source, h, u, timeout, red)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", source, red.Error(err))
	}
	return u, red, client, nil
}

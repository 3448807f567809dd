package sources

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

const renderReply = `[{"target":"tcp.node-1.rx","datapoints":[[1.5,1796028450]]}]`

// recorder answers a fixed render reply and keeps the last request's headers and URL.
func recorder(t *testing.T, tlsCfg *tls.Config) (*httptest.Server, *http.Request) {
	t.Helper()
	last := &http.Request{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*last = *r.Clone(context.Background())
		fmt.Fprint(w, renderReply)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	if tlsCfg != nil {
		srv.TLS = tlsCfg
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, last
}

// graphiteAt is the default Graphite configuration for url, with mod applied.
func graphiteAt(url string, mod func(*GraphiteConfig)) GraphiteConfig {
	cfg := DefaultGraphiteConfig()
	cfg.URL = url
	if mod != nil {
		mod(&cfg)
	}
	return cfg
}

// promAt is the default Prometheus configuration for url and query, with mod applied.
func promAt(url, query string, mod func(*PrometheusConfig)) PrometheusConfig {
	cfg := DefaultPrometheusConfig()
	cfg.URL, cfg.Query = url, query
	if mod != nil {
		mod(&cfg)
	}
	return cfg
}

func basicAuth(user, password string) *promconfig.BasicAuth {
	return &promconfig.BasicAuth{Username: user, Password: promconfig.Secret(password)}
}

func fetchGraphite(t *testing.T, cfg GraphiteConfig) error {
	t.Helper()
	cfg.Target, cfg.ServerNode = "tcp.*.rx", intp(1)
	g, err := NewGraphite(cfg, nil)
	require.NoError(t, err)
	loads, err := g.Fetch(context.Background(), nil)
	if err == nil {
		assert.Equal(t, 1.5, loads["node-1"][0].Value)
	}
	return err
}

func TestAuthHeadersAndURLKeysAreSent(t *testing.T) {
	srv, last := recorder(t, nil)
	base := srv.URL + "/uid1/0f1e2d3c-4b5a-6978-8899-aabbccddeeff/graphite?apikey=k1"
	require.NoError(t, fetchGraphite(t, graphiteAt(base, func(c *GraphiteConfig) {
		c.HTTP.BasicAuth = basicAuth("u", "p")
		c.HTTP.HTTPHeaders = &promconfig.Headers{Headers: map[string]promconfig.Header{
			"X-Api-Key": {Secrets: []promconfig.Secret{"h1"}}, "X-Scope-OrgID": {Values: []string{"7"}}}}
	})))
	user, pass, ok := last.BasicAuth()
	assert.True(t, ok)
	assert.Equal(t, []string{"u", "p"}, []string{user, pass})
	assert.Equal(t, "h1", last.Header.Get("X-Api-Key"))
	assert.Equal(t, "7", last.Header.Get("X-Scope-OrgID"))
	assert.Equal(t, "/uid1/0f1e2d3c-4b5a-6978-8899-aabbccddeeff/graphite/render", last.URL.Path)
	assert.Equal(t, "k1", last.URL.Query().Get("apikey"))
	assert.Equal(t, "json", last.URL.Query().Get("format"))

	require.NoError(t, fetchGraphite(t, graphiteAt(srv.URL, func(c *GraphiteConfig) {
		c.HTTP.Authorization = &promconfig.Authorization{Type: "Token", Credentials: "t0"}
	})))
	assert.Equal(t, "Token t0", last.Header.Get("Authorization"))

	// The keys of earlier releases: bearer_token and headers.
	require.NoError(t, fetchGraphite(t, graphiteAt(srv.URL, func(c *GraphiteConfig) {
		c.HTTP.BearerToken = "t1"
		c.Legacy.Headers = map[string]string{"x-api-key": "h2"}
	})))
	assert.Equal(t, "Bearer t1", last.Header.Get("Authorization"))
	assert.Equal(t, "h2", last.Header.Get("X-Api-Key"))

	p, err := NewPrometheus(promAt(srv.URL+"/prom", "up", func(c *PrometheusConfig) { c.HTTP.BearerToken = "t2" }), nil)
	require.NoError(t, err)
	_, _ = p.Fetch(context.Background(), nil) // the reply is not Prometheus'; only the request matters
	assert.Equal(t, "Bearer t2", last.Header.Get("Authorization"))
	assert.Equal(t, "/prom/api/v1/query", last.URL.Path)
}

// TestSecretFilesAreReadAtEachRequest: a password or token file rewritten
// while the daemon runs (a rotation) is used from the next request on, by the
// same source, and what the file held is what the redactor hides.
func TestSecretFilesAreReadAtEachRequest(t *testing.T) {
	srv, last := recorder(t, nil)
	dir := t.TempDir()
	pwFile, tokFile := filepath.Join(dir, "password"), filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(pwFile, []byte("first-pw\n"), 0o600))
	require.NoError(t, os.WriteFile(tokFile, []byte("first-tok\n"), 0o600))
	g, err := NewGraphite(graphiteAt(srv.URL, func(c *GraphiteConfig) {
		c.Target, c.ServerNode = "tcp.*.rx", intp(1)
		c.HTTP.BasicAuth = &promconfig.BasicAuth{Username: "u", PasswordFile: pwFile}
	}), nil)
	require.NoError(t, err)
	p, err := NewPrometheus(promAt(srv.URL, "up", func(c *PrometheusConfig) {
		c.HTTP.Authorization = &promconfig.Authorization{CredentialsFile: tokFile}
	}), nil)
	require.NoError(t, err)
	for _, round := range []string{"first", "second"} {
		require.NoError(t, os.WriteFile(pwFile, []byte(round+"-pw\n"), 0o600))
		require.NoError(t, os.WriteFile(tokFile, []byte(round+"-tok\n"), 0o600))
		_, err := g.Fetch(context.Background(), nil)
		require.NoError(t, err)
		_, pass, _ := last.BasicAuth()
		assert.Equal(t, round+"-pw", pass)
		assert.Equal(t, "REDACTED and REDACTED", g.red.String(round+"-pw and "+basicToken("u", round+"-pw")))
		_, _ = p.Fetch(context.Background(), nil)
		assert.Equal(t, "Bearer "+round+"-tok", last.Header.Get("Authorization"))
		assert.Equal(t, "Bearer REDACTED", p.red.String("Bearer "+round+"-tok"))
	}
	require.NoError(t, os.Remove(pwFile))
	_, err = g.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorContains(t, err, "unable to read basic auth password")
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	caCert, caKey := newCert(t, nil, nil, "test-ca")
	clientCert, clientKey := newCert(t, caCert, caKey, "weighter")
	certFile := writePEM(t, dir, "client.pem", "CERTIFICATE", clientCert.Raw)
	der, err := x509.MarshalECPrivateKey(clientKey)
	require.NoError(t, err)
	keyFile := writePEM(t, dir, "client-key.pem", "EC PRIVATE KEY", der)

	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	srv, _ := recorder(t, &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool})
	srvCA := writePEM(t, dir, "server-ca.pem", "CERTIFICATE", srv.Certificate().Raw)

	withTLS := func(tc promconfig.TLSConfig) GraphiteConfig {
		return graphiteAt(srv.URL, func(c *GraphiteConfig) { c.HTTP.TLSConfig = tc })
	}
	err = fetchGraphite(t, withTLS(promconfig.TLSConfig{CAFile: srvCA}))
	assert.ErrorIs(t, err, ErrUnreachable, "no client certificate")
	err = fetchGraphite(t, withTLS(promconfig.TLSConfig{CertFile: certFile, KeyFile: keyFile}))
	assert.ErrorIs(t, err, ErrUnreachable, "server certificate not trusted")
	assert.ErrorContains(t, err, "certificate")
	assert.NoError(t, fetchGraphite(t, withTLS(promconfig.TLSConfig{CAFile: srvCA, CertFile: certFile, KeyFile: keyFile})))
	assert.NoError(t, fetchGraphite(t, withTLS(promconfig.TLSConfig{InsecureSkipVerify: true, CertFile: certFile, KeyFile: keyFile})))
	// tls, the key of earlier releases, is tls_config.
	legacy := graphiteAt(srv.URL, func(c *GraphiteConfig) {
		c.Legacy.TLS = &promconfig.TLSConfig{CAFile: srvCA, CertFile: certFile, KeyFile: keyFile}
	})
	assert.NoError(t, fetchGraphite(t, legacy))
}

// newCert makes a CA (parent nil) or a client certificate signed by parent.
func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	signer, signKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	} else {
		signer, signKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert, key
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

// TestRedirectElsewhereIsNotFollowed: credentials are added below http.Client,
// where its own stripping of Authorization on a redirect to another host cannot
// see them, so a redirect to another origin must not be followed at all (it would
// also carry the URL, API key included, in its Referer). The other host must see
// no request; the error names the redirect.
func TestRedirectElsewhereIsNotFollowed(t *testing.T) {
	var leaked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		leaked.Add(1)
		fmt.Fprint(w, renderReply)
	}))
	t.Cleanup(other.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	t.Cleanup(redirect.Close)
	base := redirect.URL + "/graphite?api_key=qk-in-url"

	err := fetchGraphite(t, graphiteAt(base, func(c *GraphiteConfig) {
		c.HTTP.BearerToken = "tok"
		c.Legacy.Headers = map[string]string{"X-Api-Key": "hdr"}
	}))
	require.ErrorIs(t, err, ErrBadReply)
	assert.ErrorContains(t, err, "redirected to "+other.URL+": not followed")
	p, err := NewPrometheus(promAt(base, "up", func(c *PrometheusConfig) { c.HTTP.BasicAuth = basicAuth("u", "pw-basic") }), nil)
	require.NoError(t, err)
	_, err = p.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrBadReply)
	assert.ErrorContains(t, err, "redirected to "+other.URL+": not followed")
	assert.Zero(t, leaked.Load(), "requests that reached the other host")

	// A redirect within the configured origin is still followed.
	same := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/new/render" {
			http.Redirect(w, r, "/new/render?"+r.URL.RawQuery, http.StatusMovedPermanently)
			return
		}
		fmt.Fprint(w, renderReply)
	}))
	t.Cleanup(same.Close)
	assert.NoError(t, fetchGraphite(t, graphiteAt(same.URL, func(c *GraphiteConfig) { c.HTTP.BearerToken = "tok" })))
	// follow_redirects: false follows none, and says so.
	err = fetchGraphite(t, graphiteAt(same.URL, func(c *GraphiteConfig) { c.HTTP.FollowRedirects = false }))
	require.ErrorIs(t, err, ErrBadReply)
	assert.ErrorContains(t, err, "/new/render: not followed (follow_redirects: false)")
}

// TestHugeReplyIsRefused: a query that matches the whole fleet must not fill
// the balancer's memory, nor be decoded from a silently truncated body. Each
// reply is valid JSON padded past the limit; both sources stop reading at the
// limit and say so.
func TestHugeReplyIsRefused(t *testing.T) {
	pad := bytes.Repeat([]byte(" "), 64<<10)
	huge := func(head, tail string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, head)
			for n := 0; n <= maxBody; n += len(pad) {
				if _, err := w.Write(pad); err != nil {
					return // the client stopped reading
				}
			}
			io.WriteString(w, tail)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	// Reading 32 MiB under -race on a busy machine can take seconds: the
	// timeout is not what this test is about.
	g, err := NewGraphite(graphiteAt(huge("[", "]"), func(c *GraphiteConfig) { c.Target, c.Timeout = "x", duration.Duration(time.Minute) }), nil)
	require.NoError(t, err)
	_, err = g.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrBadReply)
	assert.ErrorContains(t, err, "reply larger than 32 MiB")

	p, err := NewPrometheus(promAt(huge(`{"status":"success","data":{"resultType":"vector","result":[`, "]}}"), "x",
		func(c *PrometheusConfig) { c.Timeout = duration.Duration(time.Minute) }), nil)
	require.NoError(t, err)
	_, err = p.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrBadReply)
	assert.ErrorContains(t, err, "reply larger than 32 MiB")
}

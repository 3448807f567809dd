package config

import (
	"testing"

	promconfig "github.com/prometheus/common/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const peerBackends = "backends:\n  - name: b\n    source: {haproxy: {counter: bytes_in}}\n"

// peer_client is Prometheus' http_config, as the sources take it: relative
// paths are relative to the file's directory, and a file without it asks
// the peers with Prometheus' defaults (no credentials, no proxy).
func TestPeerClientLoads(t *testing.T) {
	cfg, err := Parse("/etc/haproxy-weighter/config.yaml", []byte("listen: \":9842\"\npeers: [\"https://lb2:9842\"]\n"+
		"peer_client:\n  basic_auth: {username: peer, password_file: secrets/peer}\n"+
		"  tls_config: {ca_file: tls/ca.pem, cert_file: /etc/ssl/peer.crt, key_file: /etc/ssl/peer.key}\n"+peerBackends), noEnv)
	require.NoError(t, err)
	h := cfg.PeerClient.HTTP
	assert.Equal(t, "peer", h.BasicAuth.Username)
	assert.Equal(t, "/etc/haproxy-weighter/secrets/peer", h.BasicAuth.PasswordFile)
	assert.Equal(t, "/etc/haproxy-weighter/tls/ca.pem", h.TLSConfig.CAFile)
	assert.Equal(t, "/etc/ssl/peer.crt", h.TLSConfig.CertFile)
	assert.True(t, h.FollowRedirects, "Prometheus' default for a key not written")
	assert.False(t, h.ProxyFromEnvironment)

	cfg, err = Parse("c.yml", []byte("listen: \":9842\"\npeers: [\"http://lb2:9842\"]\n"+peerBackends), noEnv)
	require.NoError(t, err)
	assert.Equal(t, []string{"http://lb2:9842"}, cfg.Peers)
	assert.Equal(t, promconfig.DefaultHTTPClientConfig, cfg.PeerClient.HTTP)
}

// A bad peer_client is refused at its key's line, as the sources' HTTP
// settings are, and never shows a secret.
func TestPeerClientChecked(t *testing.T) {
	head := "listen: \":9842\"\npeers: [\"http://lb2:9842\"]\npeer_client:\n"
	for body, want := range map[string]string{
		"  basic_auth: {username: u, password: s3cretPW, password_file: pw}\n":        "c.yml:3: peer_client: at most one of basic_auth password, password_file & password_ref must be configured",
		"  basic_auth: {username: u, pasword: s3cretPW}\n":                            `c.yml:4: unknown key "pasword"`,
		"  tls_config: {ca_ref: vault}\n":                                             "c.yml:3: peer_client: tls_config.ca_ref: no secret manager here: write the secret in a file (the matching _file key)",
		"  tls_config: {cert_file: a.crt}\n":                                          "c.yml:4: tls_config: exactly one of key or key_file must be configured when a client certificate is configured",
		"  basic_auth: {username: u, password: !!int s3cretPW}\n":                     "c.yml:4: password: not a valid !!int",
		"  proxy_from_environment: true\n  proxy_url: http://u:s3cretPW@proxy:3128\n": "c.yml:3: peer_client: if proxy_from_environment is configured, proxy_url must not be configured",
	} {
		_, err := Parse("c.yml", []byte(head+body+peerBackends), noEnv)
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), want, body)
		assert.NotContains(t, err.Error(), "s3cretPW", body)
	}
}

// tls_config and oauth2 check themselves while decoded, without a line in
// yaml.v3's error: the loader finds the block that fails and says its line,
// wherever it is (a source's, peer_client's, an oauth2's own tls_config).
func TestPromBlocksCheckedWhileDecodedHaveLines(t *testing.T) {
	for body, want := range map[string]string{
		"listen: \":9842\"\npeers: [\"http://lb2:9842\"]\npeer_client:\n  tls_config: {cert_file: a.crt}\n" + peerBackends: "c.yml:4: tls_config: exactly one of key or key_file",
		"backends:\n  - name: b\n    source:\n      prometheus:\n        url: http://p\n        query: up\n" +
			"        oauth2:\n          client_id: c\n          client_secret_file: s\n          token_url: http://t\n" +
			"          tls_config: {ca_file: a, ca: b}\n": "c.yml:11: tls_config: at most one of ca, ca_file & ca_ref must be configured",
	} {
		_, err := Parse("c.yml", []byte(body), noEnv)
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), want, body)
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// The credentials of the echo test, as a review found them leaking: the
// password, the Basic token net/http sends of user:secret, and that token
// as a URL quotes it.
var echoSecrets = []string{"secret", "dXNlcjpzZWNyZXQ=", "dXNlcjpzZWNyZXQ%3D"}

// TestEchoedSecretsShowNowhere: with the password given in the URL, in
// basic_auth's password_file, or as authorization's credentials, a 502
// whose body quotes the request's Authorization header and URL shows no
// credential in once's text and JSON output, in run's log, on the status
// page or in /metrics; each of them still shows the 502.
func TestEchoedSecretsShowNowhere(t *testing.T) {
	h := testenv.StartHAProxy(t, haproxyConfig(t))
	prom := httptest.NewServer(http.HandlerFunc(testenv.EchoingProxy))
	t.Cleanup(prom.Close)
	withUser, err := url.Parse(prom.URL)
	require.NoError(t, err)
	withUser.User = url.UserPassword("user", "secret")

	styles := []struct{ name, url, auth string }{
		{"url userinfo", withUser.String(), ""},
		{"basic_auth password_file", prom.URL, "basic_auth: {username: user, password_file: password}"},
		{"authorization", prom.URL, "authorization: {credentials: secret}"},
	}
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "password"), []byte("secret\n"), 0o600))
			listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
			cfg := filepath.Join(dir, "config.yaml")
			require.NoError(t, os.WriteFile(cfg, []byte(echoConfig(listen, h.Socket, s.url, s.auth)), 0o600))

			r := runCmd(t, "once", "--config", cfg)
			assert.NotZero(t, r.code, "once against a 502")
			assertShows502(t, "once's output", r.stdout+r.stderr)

			r = runCmd(t, "once", "--config", cfg, "--output", "json")
			assert.NotZero(t, r.code, "once --output json against a 502")
			assertShows502(t, "once's JSON output", r.stdout+r.stderr)
			assert.True(t, json.Valid([]byte(r.stdout)), "once --output json prints JSON:\n%s", r.stdout)

			d := startDaemon(t, listen, "--config", cfg)
			srcErr := `haproxy_weighter_cycles_total{backend="be_ingest",result="source_error"}`
			testenv.WaitWithin(t, 20*time.Second, "a source error counted", func() bool { return d.metric(srcErr) >= 1 })
			testenv.WaitWithin(t, 5*time.Second, "the 502 in run's log", func() bool { return strings.Contains(d.logs.String(), "502 Bad Gateway") })
			code, page := d.get("/")
			require.Equal(t, http.StatusOK, code, "status page")
			assertShows502(t, "the status page", page)
			code, metrics := d.get("/metrics")
			require.Equal(t, http.StatusOK, code, "/metrics")
			testenv.AssertNoSecret(t, "/metrics", metrics, echoSecrets...)
			assert.Zero(t, d.stop(), "exit code after SIGTERM")
			assertShows502(t, "run's log", d.logs.String())
		})
	}
}

// echoConfig is a daemon reading the echoing Prometheus alone (no fast
// signal, which would weigh without it and hide the source's error).
func echoConfig(listen, socket, promURL, auth string) string {
	return fmt.Sprintf(`interval: 1s
listen: %s
haproxy:
  socket: %s
backends:
  - name: be_ingest
    fast_signal: off
    source:
      prometheus:
        url: %q
        query: %q
        %s
`, listen, socket, promURL, query, auth)
}

// assertShows502 checks that text shows the echoing reply, so that the
// check for secrets looks where the reply's quotes would be, and that it
// shows no credential.
func assertShows502(t *testing.T, what, text string) {
	t.Helper()
	assert.Contains(t, text, "502 Bad Gateway", "%s shows the reply", what)
	testenv.AssertNoSecret(t, what, text, echoSecrets...)
}

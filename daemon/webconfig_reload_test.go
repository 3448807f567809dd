package daemon

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// The web configuration file is read at each request: one broken since the
// start fails every request to the endpoints. A reload, which an operator
// sends after editing the daemon's files, says so at ERROR.
func TestReloadSaysTheWebConfigFileIsBroken(t *testing.T) {
	cfg, web, port, logs, n := webConfigSetup(t)
	d := New(cfg, Options{Log: slog.New(slog.NewTextHandler(logs, nil)), Notifier: n,
		Reload: func() (*config.Config, error) {
			next := testConfig(t, "be")
			next.Listen, next.WebConfigFile = cfg.Listen, web
			return next, nil
		}})
	r := startDaemon(t, d, n)
	// The listener reads the file once when it starts serving (for TLS): break
	// the file only after it serves, or the start itself fails.
	testenv.WaitFor(t, "the listener serving", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	// Broken: a password hash under a wrong tag, which yaml quotes in its error.
	require.NoError(t, os.WriteFile(web, []byte("basic_auth_users: {alice: !!int $2y$10$s3cr3tHash}\n"), 0o600))
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode, "the broken file fails the request")

	r.hup <- os.Interrupt
	testenv.WaitFor(t, "the reload", func() bool { return strings.Contains(logs.String(), "config reloaded") })
	assert.Contains(t, logs.String(), `level=ERROR msg="web configuration file broken"`)
	assert.Contains(t, logs.String(), "web config file "+web)
	require.NoError(t, r.stop())
	assert.Contains(t, logs.String(), `msg="Unable to parse configuration" component=web err="yaml: cannot decode !!str as a !!int"`)
	assert.NotContains(t, logs.String(), "s3cr3t", "no request's log line nor the reload's shows the hash")
}

package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// webConfigSetup is a configuration for backend "be" that listens on a free
// port of 127.0.0.1 with a valid web configuration file (no users), the path
// of that file, the port, and the log buffer and notifier a daemon built from
// it is given.
func webConfigSetup(t *testing.T) (cfg *config.Config, web string, port int, logs *testenv.SyncBuffer, n *recordingNotifier) {
	t.Helper()
	web = filepath.Join(t.TempDir(), "web.yml")
	require.NoError(t, os.WriteFile(web, []byte("basic_auth_users: {}\n"), 0o600))
	port = testenv.FreePort(t)
	cfg = testConfig(t, "be")
	cfg.Listen, cfg.WebConfigFile = fmt.Sprintf("127.0.0.1:%d", port), web
	return cfg, web, port, &testenv.SyncBuffer{}, &recordingNotifier{ready: make(chan struct{})}
}

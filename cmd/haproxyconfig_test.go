package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// validate prints the warnings about HAProxy's configuration that run
// logs, in the same words, and exits 0; a file it cannot read is an error
// naming it. --haproxy-config overrides the key.
func TestValidateWarnsAboutTheHAProxyConfiguration(t *testing.T) {
	dir := t.TempDir()
	haproxyCfg := filepath.Join(dir, "haproxy.cfg")
	sock := filepath.Join(dir, "admin.sock")
	require.NoError(t, os.WriteFile(haproxyCfg, []byte(fmt.Sprintf(`global
  stats socket %s level operator
defaults
  mode tcp
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  load-server-state-from-file local
backend be
  balance static-rr
  server s1 127.0.0.1:18081
`, sock)), 0o600))
	out, err := exec.Command("haproxy", "-c", "-f", haproxyCfg).CombinedOutput()
	require.NoError(t, err, "haproxy -c: %s", out)
	path := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte("haproxy:\n  socket: "+sock+"\n  config_file: "+haproxyCfg+
		"\nbackends:\n  - name: be\n    source: {haproxy: {counter: current_sessions}}\n"), 0o600))

	// Compiler-style, as the deprecated keys' warnings: file:line: warning: message.
	want := haproxyCfg + ":2: warning: stats socket " + sock + " is level operator: setting weights needs level admin\n" +
		haproxyCfg + ":10: warning: backend be: balance static-rr: HAProxy takes no runtime weight but 0 and 100%; use roundrobin or leastconn\n"

	stdout, stderr, err := execute(t, "validate", path)
	require.NoError(t, err, "warnings do not fail validate")
	assert.Equal(t, path+": ok (1 backends)\n", stdout)
	assert.Equal(t, want, stderr)

	missing := filepath.Join(dir, "missing.cfg")
	_, _, err = execute(t, "validate", path, "--haproxy-config", missing)
	require.Error(t, err)
	assert.Equal(t, "haproxy.config_file: read HAProxy configuration: open "+missing+": no such file or directory", err.Error())
}

// run and once take --haproxy-config with a configuration file (over its
// key) and with the backend flags.
func TestHAProxyConfigFlagSetsTheKey(t *testing.T) {
	for _, args := range [][]string{
		{"--config", "../examples/config/haproxy-stats.yaml", "--haproxy-config", "/etc/haproxy/haproxy.cfg"},
		{"--backend", "b", "--haproxy-counter", "bytes_in", "--haproxy-config", "/etc/haproxy/haproxy.cfg"},
	} {
		c := &cobra.Command{Use: "x"}
		cf := addConfigFlags(c, true)
		require.NoError(t, c.ParseFlags(args))
		cfg, err := cf.load()
		require.NoError(t, err, "%v", args)
		assert.Equal(t, "/etc/haproxy/haproxy.cfg", cfg.HAProxy.ConfigFile, "%v", args)
	}
	c := &cobra.Command{Use: "x"}
	cf := addConfigFlags(c, true)
	require.NoError(t, c.ParseFlags([]string{"--backend", "b", "--haproxy-counter", "bytes_in"}))
	cfg, err := cf.load()
	require.NoError(t, err)
	assert.Empty(t, cfg.HAProxy.ConfigFile, "no file, no checks")
}

package config

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeHAProxyConfig writes an HAProxy configuration with an admin socket,
// the server state kept across reloads and the given backend sections, and
// proves it valid with the real haproxy -c.
func writeHAProxyConfig(t *testing.T, dir, name, socket, backends string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	cfg := fmt.Sprintf(`global
  stats socket %s level admin
  server-state-file %s
defaults
  mode tcp
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  load-server-state-from-file global
%s`, socket, filepath.Join(dir, name+".state"), backends)
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	out, err := exec.Command("haproxy", "-c", "-f", path).CombinedOutput()
	require.NoError(t, err, "haproxy -c -f %s: %s", path, out)
	return path
}

// A backend with a socket of its own is checked against its own
// config_file, not the top-level one; a backend of a socket without a file
// is not checked, nor is the master CLI's socket (be_m would otherwise get
// "no stats socket"); server_map targets are the servers expected, unless
// they are addresses (match: address).
func TestHAProxyFileWarningsPerSocket(t *testing.T) {
	dir := t.TempDir()
	a := writeHAProxyConfig(t, dir, "a.cfg", "/run/a.sock", "backend be_a\n  server s1 127.0.0.1:18081\n"+
		"backend be_addr\n  server-template srv 2 127.0.0.1:18084\n")
	b := writeHAProxyConfig(t, dir, "b.cfg", "/run/b.sock", "backend be_b\n  balance static-rr\n  server s1 127.0.0.1:18082\n")
	// The master CLI is haproxy -S's: not a stats socket of the file.
	m := writeHAProxyConfig(t, dir, "m.cfg", "/run/m.sock", "backend be_m\n  server s1 127.0.0.1:18083\n")
	yml := `haproxy: {socket: /run/a.sock, config_file: ` + a + `}
backends:
  - name: be_a
    source: {prometheus: {url: "http://127.0.0.1:9090", query: up, server_map: {node1: s1, node2: s2}}}
  - name: be_addr
    match: address
    source: {prometheus: {url: "http://127.0.0.1:9090", query: up, server_map: {node1: "127.0.0.1:18084"}}}
  - name: be_b
    haproxy: {socket: /run/b.sock, config_file: ` + b + `}
    source: {haproxy: {counter: current_sessions}}
  - name: be_c
    haproxy: {socket: /run/c.sock}
    source: {haproxy: {counter: current_sessions}}
  - name: be_m
    haproxy: {socket: /run/master.sock, master: true, config_file: ` + m + `}
    source: {haproxy: {counter: current_sessions}}
`
	cfg, err := Parse("test.yml", []byte(yml), nil)
	require.NoError(t, err)
	warnings, err := cfg.HAProxyFileWarnings()
	require.NoError(t, err)
	var got []string
	for _, w := range warnings {
		got = append(got, w.String())
	}
	assert.Equal(t, []string{
		a + ":10: warning: backend be_a: server s2 (named by server_map) is declared by no server or server-template line",
		b + ":11: warning: backend be_b: balance static-rr: HAProxy takes no runtime weight but 0 and 100%; use roundrobin or leastconn",
	}, got)

	require.NoError(t, os.Remove(a))
	warnings, err = cfg.HAProxyFileWarnings()
	require.Error(t, err)
	assert.Contains(t, err.Error(), a)
	require.Len(t, warnings, 1, "the other file is still checked")
	assert.Equal(t, "be_b", warnings[0].Backend)
}

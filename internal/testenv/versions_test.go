package testenv

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fatalOf runs start with a TB that records Fatalf, and returns the message.
func fatalOf(t *testing.T, start func(testing.TB)) string {
	t.Helper()
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); start(f) }()
	<-done
	return f.msg
}

// runningVersion asks a runtime socket which HAProxy answers (show info's Version).
func runningVersion(t *testing.T, reply string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^Version: (\S+)`).FindStringSubmatch(reply)
	require.NotNil(t, m, "no Version in show info:\n%s", reply)
	return m[1]
}

// Every version starts, answers on its runtime socket as that version, and
// in master-worker mode survives a reload: the fetched ones run through a
// wrapper, and the master re-executes itself on reload.
func TestHAProxyVersionsStart(t *testing.T) {
	require.Equal(t, []string{"2.6", "3.0", "3.2", "3.4"}, HAProxyVersions())
	for _, v := range HAProxyVersions() {
		t.Run(v, func(t *testing.T) {
			h := StartHAProxyVersion(t, v, HAProxyDefaults)
			assert.Equal(t, v, h.Version)
			info := command(t, h.Socket, "show info")
			assert.True(t, strings.HasPrefix(runningVersion(t, info), v+"."), info)

			m := StartHAProxyMasterVersion(t, v, HAProxyDefaults)
			assert.Equal(t, v, m.Version)
			assert.True(t, strings.HasPrefix(runningVersion(t, m.Command("@1 show info")), v+"."))
			old := m.Worker()
			assert.NotEqual(t, old, m.Reload(), "a new worker after the reload")
			assert.True(t, strings.HasPrefix(runningVersion(t, m.Command("@1 show info")), v+"."))
		})
	}
}

// The default is Debian 12's 2.6, as before versions existed.
func TestStartHAProxyIsDefaultVersion(t *testing.T) {
	h := StartHAProxy(t, HAProxyDefaults)
	assert.Equal(t, DefaultHAProxyVersion, h.Version)
	assert.True(t, strings.HasPrefix(runningVersion(t, command(t, h.Socket, "show info")), "2.6."))
}

// A version that is not fetched fails the test (never a skip) and says how
// to fetch it; so does a version no test knows.
func TestMissingVersionFailsWithFetchHint(t *testing.T) {
	t.Setenv("HAPROXY_VERSIONS_DIR", t.TempDir())
	msg := fatalOf(t, func(tb testing.TB) { StartHAProxyVersion(tb, "3.2", "") })
	assert.Contains(t, msg, "HAProxy 3.2 is not fetched")
	assert.Contains(t, msg, "tools/haproxy-versions.sh")
	msg = fatalOf(t, func(tb testing.TB) { StartHAProxyMasterVersion(tb, "3.4", "") })
	assert.Contains(t, msg, "tools/haproxy-versions.sh")
	msg = fatalOf(t, func(tb testing.TB) { StartHAProxyVersion(tb, "2.8", "") })
	assert.Contains(t, msg, `"2.8" is not a tested version`)
}

// A wrapper that runs another version than its name says (a cache from a
// time the archive had another branch) fails instead of mislabelling results.
func TestWrongVersionBinaryFails(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HAPROXY_VERSIONS_DIR", dir)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	fake := "#!/bin/sh\necho 'HAProxy version 3.0.11-1 2026/10/15 - https://haproxy.org/'\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin", "haproxy-3.2"), []byte(fake), 0o755))
	msg := fatalOf(t, func(tb testing.TB) { StartHAProxyVersion(tb, "3.2", "") })
	assert.Contains(t, msg, "is HAProxy 3.0, not 3.2")
}

// command sends one command to a runtime socket and returns the reply.
func command(t *testing.T, socket, cmd string) string {
	t.Helper()
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = fmt.Fprintf(c, "%s\n", cmd)
	require.NoError(t, err)
	out, err := io.ReadAll(c)
	require.NoError(t, err, "%s on %s", cmd, socket)
	return string(out)
}

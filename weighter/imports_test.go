package weighter

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forbidden reports whether package weighter must not depend on path: it does
// no I/O of its own, so no network, no processes, no HAProxy or Prometheus
// libraries, and none of the project's I/O packages.
func forbidden(path string) bool {
	for _, prefix := range []string{
		"net", "os/exec",
		"github.com/haproxytech/", "github.com/prometheus/", "github.com/cloudflare/ipvs",
		"github.com/haproxy-weighter/haproxy-weighter/haproxy", "github.com/haproxy-weighter/haproxy-weighter/sources",
		"github.com/haproxy-weighter/haproxy-weighter/lvs",
	} {
		if path == prefix || strings.HasPrefix(path, strings.TrimSuffix(prefix, "/")+"/") {
			return true
		}
	}
	return false
}

func TestForbidden(t *testing.T) {
	for _, p := range []string{"net", "net/http", "os/exec", "github.com/prometheus/client_golang/prometheus",
		"github.com/haproxytech/client-native/v5", "github.com/haproxy-weighter/haproxy-weighter/sources"} {
		assert.True(t, forbidden(p), p)
	}
	for _, p := range []string{"fmt", "os", "network/x", "time", "github.com/haproxy-weighter/haproxy-weighter/weighter"} {
		assert.False(t, forbidden(p), p)
	}
}

// TestNoIOImports lists every package weighter depends on, directly or not
// (tests excluded), and fails on any forbidden one.
func TestNoIOImports(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go tool must be on PATH to list dependencies (install Go 1.26 to /usr/local/go)")
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/haproxy-weighter/haproxy-weighter/weighter")
	for _, dep := range deps {
		assert.False(t, forbidden(dep), "weighter depends on %s", dep)
	}
	// fmt needs os, so os is among the deps; but weighter itself must not use it.
	out, err = exec.Command(goBin, "list", "-f", "{{join .Imports \"\\n\"}}", ".").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	assert.NotContains(t, strings.Fields(string(out)), "os", "weighter imports os")
	assert.Contains(t, strings.Fields(string(out)), "math", "the import list is read")
}

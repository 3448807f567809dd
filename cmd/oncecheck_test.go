package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// once printed `set` rows and exited 0 for a backend whose algorithm ignores
// or refuses runtime weights (static-rr, map-based hashing, first); only
// --apply failed, and for `first` not even that. It runs run's start checks:
// exit 1 with the check's message, and no plan.
func TestOnceRunsTheStartChecks(t *testing.T) {
	port := func() int { return testenv.FreePort(t) }
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
backend be_rr
  balance roundrobin
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 10
backend be_static
  balance static-rr
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 10
backend be_map
  balance source
  hash-type map-based
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 10
backend be_first
  balance first
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 10
`, port(), port(), port(), port(), port(), port(), port(), port()))
	for backend, want := range map[string]string{
		"be_static": "backend be_static: haproxy_error: backend be_static: backend algorithm does not accept runtime weights: balance static-rr (static-rr only accepts weights 0% and 100% at runtime)",
		"be_map":    "backend be_map: haproxy_error: backend be_map: balance source with hash-type map-based: backend algorithm does not accept runtime weights",
		"be_first":  "backend be_first: haproxy_error: backend be_first: backend algorithm does not accept runtime weights: balance first (first ignores server weights)",
		"be_rr":     "",
	} {
		for _, apply := range []bool{false, true} {
			path := filepath.Join(t.TempDir(), "c.yaml")
			// The HAProxy stats source with a short sample_interval: loads without a wait.
			data := fmt.Sprintf("listen: \"\"\nhaproxy: {socket: %s}\nbackends:\n  - name: %s\n"+
				"    source: {haproxy: {counter: current_sessions, sample_interval: 100ms}}\n", h.Socket, backend)
			require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
			args := []string{"once", "--config", path}
			if apply {
				args = append(args, "--apply")
			}
			var out, errb bytes.Buffer
			code := executeArgs(args, &out, &errb)
			name := fmt.Sprintf("%s apply=%v", backend, apply)
			if want == "" {
				assert.Equal(t, 0, code, "%s: stderr %s", name, errb.String())
				assert.Contains(t, out.String(), "backend be_rr: ok", name)
				continue
			}
			assert.Equal(t, 1, code, name)
			assert.Contains(t, errb.String(), "error: "+want, name)
			assert.NotContains(t, out.String(), "SERVER", "%s: a plan was printed:\n%s", name, out.String())
			assert.True(t, strings.HasPrefix(out.String(), "backend "+backend+": haproxy_error;"), "%s: %s", name, out.String())
		}
	}
}

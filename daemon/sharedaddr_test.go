package daemon

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestSharedServerAddressIsSaid: two backends of one real HAProxy with a
// server at one address, both weighed by the kernel's socket table, which
// counts HAProxy's connections to that address in both. The daemon holds
// both backends' configuration and says so once (not every cycle), with
// what to do; a server address of one backend alone is not said.
func TestSharedServerAddressIsSaid(t *testing.T) {
	shared, own1, own2 := testenv.StartDiscardServer(t), testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)
	front1, front2 := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe1
  bind %s
  default_backend be1
frontend fe2
  bind %s
  default_backend be2
backend be1
  balance leastconn
  server a %s weight 100
  server b %s weight 100
backend be2
  balance leastconn
  server x %s weight 100
  server y %s weight 100
`, front1, front2, shared, own1, shared, own2))
	yml := fmt.Sprintf("listen: \"\"\ninterval: 500ms\njitter: 0\nhaproxy: {socket: %s}\nbackends:\n"+
		"  - name: be1\n    source: {haproxy: {counter: bytes_in}}\n"+
		"  - name: be2\n    source: {haproxy: {counter: bytes_in}}\n", h.Socket)
	cfg, err := config.Parse("shared.yml", []byte(yml), nil)
	require.NoError(t, err)
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	d := New(cfg, Options{Registry: reg, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	runDaemon(t, d)
	const said = `msg="server address in two backends"`
	testenv.WaitWithin(t, 30*time.Second, "the shared address said", func() bool { return strings.Contains(logs.String(), said) })
	cycles := func(backend string) float64 {
		v, _ := seriesValue(t, reg, "haproxy_weighter_cycles_total", map[string]string{"backend": backend, "result": "ok"})
		return v
	}
	c1, c2 := cycles("be1"), cycles("be2")
	testenv.WaitWithin(t, 30*time.Second, "five more cycles of each backend", func() bool {
		return cycles("be1") >= c1+5 && cycles("be2") >= c2+5
	})
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, said), "said once, not every cycle:\n%s", out)
	line := ""
	for l := range strings.Lines(out) {
		if strings.Contains(l, said) {
			line = l
		}
	}
	assert.Contains(t, line, "address="+shared)
	assert.Contains(t, line, "fast_signal: sessions")
	assert.NotContains(t, line, own1)
	assert.NotContains(t, line, own2)
}

package haproxy

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestCheckProbeLeavesDrainedServers: on a hash backend Check probes a
// server with a weight it then puts back. A server an operator drained by
// weight 0 must not be the probe: for the span between the two writes it
// would take new connections and move part of the consistent-hash ring. When
// every server is at 0 there is nothing to probe without undraining one: the
// admin-level write of the weight it has is all Check sends.
func TestCheckProbeLeavesDrainedServers(t *testing.T) {
	port := func() int { return testenv.FreePort(t) }
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
backend be_hash
  balance source
  hash-type consistent
  server s1 127.0.0.1:%d weight 3
  server s2 127.0.0.1:%d weight 3
backend be_hash_drained
  balance source
  hash-type consistent
  server d1 127.0.0.1:%d weight 3
`, port(), port(), port()))
	c := newClient(t, h.Socket)
	require.Empty(t, raw(t, c, "set weight be_hash/s1 0"), "the operator drains s1")
	require.Empty(t, raw(t, c, "set weight be_hash_drained/d1 0"), "and d1")
	var mu sync.Mutex
	var sent []string
	c.trace = func(cmds []string) { mu.Lock(); sent = append(sent, cmds...); mu.Unlock() }

	require.NoError(t, c.Backend("be_hash").Check(testCtx(t)))
	require.NoError(t, c.Backend("be_hash_drained").Check(testCtx(t)))

	mu.Lock()
	all := append([]string(nil), sent...)
	mu.Unlock()
	var writes []string
	for _, cmd := range all {
		if strings.HasPrefix(cmd, "set server ") {
			writes = append(writes, cmd)
		}
	}
	assert.Equal(t, []string{
		"set server be_hash/s2 weight 1", "set server be_hash/s2 weight 3",
		"set server be_hash_drained/d1 weight 0",
	}, writes, "no drained server is given a weight")
	assert.Equal(t, 0, byName(t, c.Backend("be_hash"))["s1"].Weight)
	assert.Equal(t, 3, byName(t, c.Backend("be_hash"))["s2"].Weight)
}

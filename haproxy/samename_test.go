package haproxy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestStatsOfBackendNamedLikeItsFrontend: "frontend app" + "backend app" is a
// common layout, and `show stat app ...` resolves the name to whichever proxy
// comes first (here the frontend), which has no server rows. The servers must
// still be found, with their open sessions.
func TestStatsOfBackendNamedLikeItsFrontend(t *testing.T) {
	cfg := testenv.HAProxyDefaults + fmt.Sprintf(`
frontend app
  bind 127.0.0.1:%d
  default_backend app
backend app
  balance roundrobin
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 20
`, testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t))
	h := testenv.StartHAProxy(t, cfg)
	c := newClient(t, h.Socket)

	stats, err := c.Stats(testCtx(t), "app")
	require.NoError(t, err)
	var names []string
	for _, s := range stats {
		names = append(names, s.Server)
	}
	assert.Equal(t, []string{"s1", "s2"}, names)
	assert.Len(t, byName(t, c.Backend("app")), 2)
	require.NoError(t, c.Backend("app").Check(testCtx(t)), "check finds the backend's algorithm")
}

// TestStatsReplyForAnotherBackend: rows of another proxy in the reply are a bad
// reply, not silently "no servers".
func TestStatsReplyForAnotherBackend(t *testing.T) {
	f := startFake(t, false, prompts("# pxname,svname,bin,bout,stot,scur,\nother,s1,1,2,3,4,\nother,BACKEND,1,2,3,4,"))
	_, err := fakeClient(t, f.path).Stats(testCtx(t), "be")
	require.ErrorIs(t, err, ErrBadReply)
	assert.Contains(t, err.Error(), "other")
}

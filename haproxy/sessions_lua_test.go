package haproxy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// luaSocketTask is a Lua task holding a core.tcp() connection to %s:%d and
// sending on it every 100 ms, as a review found it: its stream is listed by
// `show sess all` with frontend LUA-SOCKET and server "(null)". It connects
// again if the connection fails (the first connect can come before the
// process accepts connections).
const luaSocketTask = `
core.register_task(function()
  while true do
    local s = core.tcp()
    if s:connect("%s", %d) then
      while s:send("x\n") do
        core.msleep(100)
      end
    end
    core.msleep(100)
  end
end)
`

// startLuaSocketHAProxy starts HAProxy with a Lua task holding a socket to a
// discard server, and fe_app → be_app (roundrobin s1, s2 on discard
// servers) with one client connection on each server, each having sent 100
// bytes. It returns once `show sess all` lists the Lua stream.
func startLuaSocketHAProxy(t *testing.T) (*testenv.HAProxy, *Client) {
	t.Helper()
	luaTarget := testenv.StartDiscardServer(t)
	host, port, ok := strings.Cut(luaTarget, ":")
	require.True(t, ok)
	lua := filepath.Join(t.TempDir(), "socket.lua")
	var portN int
	_, err := fmt.Sscan(port, &portN)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(lua, []byte(fmt.Sprintf(luaSocketTask, host, portN)), 0o644))
	fe := testenv.FreePort(t)
	// A second global section adds to testenv's: HAProxy merges them.
	h := testenv.StartHAProxy(t, fmt.Sprintf(`
global
  lua-load %s
`, lua)+testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe_app
  bind 127.0.0.1:%d
  default_backend be_app
backend be_app
  balance roundrobin
  server s1 %s
  server s2 %s
`, fe, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)))
	c := newClient(t, h.Socket)
	for range 2 {
		conn := dialFront(t, fe)
		_, err := conn.Write(make([]byte, 100))
		require.NoError(t, err)
	}
	testenv.WaitFor(t, "the Lua socket's stream and both clients' bytes", func() bool {
		dump := rawDump(t, h.Socket, "show sess all")
		return strings.Contains(dump, "frontend=LUA-SOCKET") && strings.Contains(dump, "server=(null)") &&
			strings.Count(dump, "total=100)") == 2
	})
	return h, c
}

// TestSessionsWithLuaSocketStream is the first bug a review found on HAProxy 2.6:
// a Lua task's core.tcp() stream (frontend LUA-SOCKET, server "(null)") made
// the reader refuse the whole dump ("invalid server name \"(null)\""), so
// every backend lost its local signal and shedding for as long as the
// socket lived. It is HAProxy's own stream, not a backend's: listed as
// internal, never counted on a backend.
func TestSessionsWithLuaSocketStream(t *testing.T) {
	_, c := startLuaSocketHAProxy(t)

	all, err := c.Sessions(testCtx(t))
	require.NoError(t, err)
	var lua []Session
	for _, s := range all {
		if s.Frontend == "LUA-SOCKET" {
			lua = append(lua, s)
		}
	}
	require.Len(t, lua, 1, "the Lua task's stream")
	assert.True(t, lua[0].Internal)
	assert.Equal(t, "LUA-SOCKET", lua[0].Backend)
	assert.Equal(t, "", lua[0].Server, "HAProxy's unnamed Lua socket server")

	app, err := c.Backend("be_app").Sessions(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, []streamShape{{"fe_app", "be_app", "s1", 100, 0}, {"fe_app", "be_app", "s2", 100, 0}}, shapesOf(app))

	r, err := c.Backend("be_app").ReadLocal(testCtx(t), LocalQuery{Servers: []string{"s1", "s2"}, Open: true})
	require.NoError(t, err)
	assert.Equal(t, 1, r.OpenAt["s1"])
	assert.Equal(t, 1, r.OpenAt["s2"])
	assert.Len(t, r.Open, 2)
	assert.Zero(t, r.Skipped, "the Lua stream is read, not skipped: %v", r.SkipReason)
	// A backend named like the internal proxy gets none of its streams.
	lb, err := c.Backend("LUA-SOCKET").Sessions(testCtx(t))
	require.NoError(t, err)
	assert.Empty(t, lb)
}

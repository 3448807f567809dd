package fastsignal

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestShedStreamReadsSpacedOn30: on HAProxy 3.0 with a Lua socket open, the
// dump guard holds the stream dump back, and the short `show sess` it asks
// first lists every stream. While shedding wants a hot server's streams,
// the socket table reader asks it no more often than a successful read
// would be spaced (LocalBudget.Share at least): once over five reads within
// one Share, once more after it. The reader's clock is the test's.
func TestShedStreamReadsSpacedOn30(t *testing.T) {
	luaTarget := testenv.StartDiscardServer(t)
	host, port, _ := strings.Cut(luaTarget, ":")
	lua := filepath.Join(t.TempDir(), "socket.lua")
	require.NoError(t, os.WriteFile(lua, []byte(fmt.Sprintf(`
core.register_task(function()
  while true do
    local s = core.tcp()
    if s:connect("%s", %s) then
      while s:send("x\n") do core.msleep(100) end
    end
    core.msleep(100)
  end
end)
`, host, port)), 0o644))
	front := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	h := testenv.StartHAProxyVersion(t, "3.0", fmt.Sprintf("global\n  lua-load %s\n", lua)+testenv.HAProxyDefaults+fmt.Sprintf(
		"frontend fe\n  bind %s\n  default_backend be\nbackend be\n  server s1 %s\n", front, testenv.StartDiscardServer(t)))
	c, err := net.Dial("tcp", front)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	testenv.WriteEvery(t, c, 500, 20*time.Millisecond)

	counted := testenv.StartCommandCounter(t, h.Socket)
	hc, err := haproxy.New(haproxy.Config{Socket: counted.Socket})
	require.NoError(t, err)
	hb := hc.Backend("be")
	var logs testenv.SyncBuffer
	k := newKernelReader(hb, hc, false, weighter.BytesIn, slog.New(slog.NewTextHandler(&logs, nil)))
	now := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	k.now = func() time.Time { return now }
	sh, err := weighter.NewShedder(weighter.ShedPolicy{Above: 1.5, For: 1, MaxPerMinute: 2, MaxShare: 1, Progress: 0.2})
	require.NoError(t, err)
	k.shedder.Store(sh) // for: 1: every server's connections are looked up

	ctx := testenv.Context(t, time.Minute)
	read := func() {
		t.Helper()
		servers, err := hb.Servers(ctx)
		require.NoError(t, err)
		got, err := k.ReadLocal(ctx, servers)
		require.NoError(t, err)
		require.NotEmpty(t, got.Open, "the client's connection")
	}
	shortSess := func() int {
		n := 0
		for _, line := range counted.Lines() {
			if line == "show sess" {
				n++
			}
		}
		return n
	}
	testenv.WaitFor(t, "the guard holding the dump back (the Lua socket's stream listed)", func() bool {
		read()
		return strings.Contains(logs.String(), "stream dump not sent")
	})
	asked := shortSess()
	for range 5 {
		read()
	}
	t.Logf("show sess: %d before, %d after five reads within one Share; show sess all: %d", asked, shortSess(), counted.Count("show sess all"))
	assert.Equal(t, asked, shortSess(), "show sess asked again within Share after the guard held the dump back")
	assert.Zero(t, counted.Count("show sess all"), "the dump was sent on 3.0 with a Lua socket open")

	now = now.Add(haproxy.DefaultLocalBudget.Share)
	read()
	assert.Equal(t, asked+1, shortSess(), "once Share has passed the streams are asked for again")
	assert.Equal(t, 1, strings.Count(logs.String(), `msg="streams to shed not read"`), "the failure said once")
}

package haproxy

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// startAgent serves HAProxy's agent-check on 127.0.0.1, answering reply to
// every check. It is a fault injector: the text is what a server's agent
// may say, here the master CLI's prompt inside `show stat`'s last_agt.
func startAgent(t *testing.T, reply string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			_, _ = conn.Write([]byte(reply))
			conn.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// A server's agent-check description is text from outside HAProxy that
// `show stat` prints; when it holds the master CLI's prompt, the client
// still splits the master's replies where the master put them: the stats
// and the check read every server, and a batch is verified as written.
func TestMasterCLIPromptInsideAReply(t *testing.T) {
	agent := startAgent(t, "down # master> injected master[x]> \n")
	h := testenv.StartHAProxyMaster(t, testenv.HAProxyDefaults+fmt.Sprintf(`
backend be
  balance roundrobin
  server s1 127.0.0.1:%d weight 10 agent-check agent-port %d agent-inter 100ms
  server s2 127.0.0.1:%d weight 20
`, testenv.FreePort(t), agent, testenv.FreePort(t)))
	testenv.WaitFor(t, "the agent's text in show stat", func() bool {
		return strings.Contains(h.Command("@1 show stat be 6 -1"), "master> injected")
	})
	c, err := New(Config{Socket: h.Socket, Master: true, Timeout: duration.Duration(5 * time.Second)})
	require.NoError(t, err)
	ctx := testCtx(t)
	stats, err := c.Stats(ctx, "be")
	require.NoError(t, err)
	var names []string
	for _, s := range stats {
		names = append(names, s.Server)
	}
	assert.Equal(t, []string{"s1", "s2"}, names)
	b := c.Backend("be")
	require.NoError(t, b.Check(ctx))
	require.NoError(t, b.SetWeights(ctx, []weighter.Change{{Server: "s2", Weight: 7}}))
	assert.Equal(t, 7, byName(t, b)["s2"].Weight)
}

// A reload with a broken configuration file leaves the old worker current
// and the master's prompt "master[ReloadFailed]> ": the client reads,
// checks and writes on through it.
func TestMasterCLIAfterFailedReload(t *testing.T) {
	h := testenv.StartHAProxyMaster(t, appConfig(t))
	worker := h.Worker()
	require.NoError(t, os.WriteFile(h.Config, []byte("backend broken\n  no-such-keyword\n"), 0o600))
	h.SignalReload()
	testenv.WaitFor(t, "the reload to fail", func() bool {
		// The master re-executes itself to reload: it may refuse or cut a
		// connection meanwhile.
		out, _ := tryMaster(h.Socket, "show proc")
		return strings.Contains(out, "[failed: 1]")
	})
	require.Equal(t, worker, h.Worker(), "the old worker stays current")
	require.Contains(t, h.Command("prompt\nshow version"), "master[ReloadFailed]> ", "the prompt this test is about")

	c, err := New(Config{Socket: h.Socket, Master: true, Timeout: duration.Duration(5 * time.Second)})
	require.NoError(t, err)
	ctx := testCtx(t)
	b := c.Backend("be_app")
	require.NoError(t, b.Check(ctx))
	require.NoError(t, b.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 9}, {Server: "s2", Weight: 99}}))
	got := byName(t, b)
	assert.Equal(t, 9, got["s1"].Weight)
	assert.Equal(t, 99, got["s2"].Weight)
	stats, err := c.Stats(ctx, "be_app")
	require.NoError(t, err)
	assert.Len(t, stats, 4)
	_, err = c.Backend("nope").Servers(ctx)
	require.ErrorIs(t, err, ErrNoBackend, "an error reply is one still")
}

// tryMaster sends one command to the master CLI at socket and returns what
// came back before it closed.
func tryMaster(socket, cmd string) (string, error) {
	conn, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(cmd + "\nquit\n")); err != nil {
		return "", err
	}
	out, err := io.ReadAll(conn)
	return string(out), err
}

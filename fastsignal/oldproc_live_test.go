package fastsignal

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// shedWhale is a whale's chunk, written every testenv.ShedTick: 50 kB/s,
// fifty times an ordinary client of the daemon's shed tests.
const shedWhale = 1000

// TestKernelCountsTheOldProcessAfterSoftReload: HAProxy without a master,
// reloaded as the init scripts do (`-sf <old pid>`): the old process keeps
// serving the connection it had, and the socket table reader goes on
// counting it, whether it read before the reload (it knew the old process)
// or starts after it (the new process's command line names it); the log
// says so once.
func TestKernelCountsTheOldProcessAfterSoftReload(t *testing.T) {
	front := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(
		"frontend fe\n  bind %s\n  default_backend be\nbackend be\n  server s1 %s\n", front, testenv.StartDiscardServer(t)))
	c, err := net.Dial("tcp", front)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	testenv.WriteEvery(t, c, 500, 20*time.Millisecond)

	hc, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	hb := hc.Backend("be")
	ctx := testenv.Context(t, time.Minute)
	var logs testenv.SyncBuffer
	reader := func() *kernelReader {
		return newKernelReader(hb, hc, false, weighter.BytesIn, slog.New(slog.NewTextHandler(&logs, nil)))
	}
	// bytes reads s1's bytes through k.
	bytes := func(k *kernelReader) float64 {
		t.Helper()
		servers, err := hb.Servers(ctx)
		require.NoError(t, err)
		got, err := k.ReadLocal(ctx, servers)
		require.NoError(t, err)
		return got.Servers["s1"].Bytes
	}
	grows := func(what string, k *kernelReader) {
		t.Helper()
		from := bytes(k)
		testenv.WaitFor(t, what, func() bool { return bytes(k) > from })
	}
	before := reader()
	grows("s1's bytes counted before the reload", before)

	old := h.ReloadSoft()
	require.NotEqual(t, old, h.PID())
	grows("s1's bytes still counted by the reader that knew the old process", before)
	grows("s1's bytes counted by a reader started after the reload", reader())
	t.Logf("HAProxy %d reloaded into %d; log:\n%s", old, h.PID(), logs.String())
	assert.Equal(t, 2, strings.Count(logs.String(), "old HAProxy process still serves connections"), "said once by each reader")
	assert.Contains(t, logs.String(), fmt.Sprintf("old_pids=[%d]", old))
}

// TestKernelShedLeavesTheOldProcessStream: on a worker's own socket (no
// master CLI), a reload hands the socket to a new process. The stream
// found in the old one is not offered for closing after it (the socket
// cannot reach it, and the new process has no such stream), though its
// connection is still counted; and a reader that did not know the old
// process looks for that connection's stream in the new process once, not
// at every Share while the server is hot.
func TestKernelShedLeavesTheOldProcessStream(t *testing.T) {
	front := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(
		"frontend fe\n  bind %s\n  default_backend be\nbackend be\n  server s1 %s\n", front, testenv.StartDiscardServer(t)))
	whale := testenv.DialShedClient(t, front, shedWhale)
	client := whale.Conn.LocalAddr().String()
	counted := testenv.StartCommandCounter(t, h.Socket)
	hc, err := haproxy.New(haproxy.Config{Socket: counted.Socket})
	require.NoError(t, err)
	hb := hc.Backend("be")
	ctx := testenv.Context(t, time.Minute)
	now := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	reader := func() *kernelReader {
		k := newKernelReader(hb, hc, false, weighter.BytesIn, slog.New(slog.DiscardHandler))
		k.now = func() time.Time { return now }
		sh, err := weighter.NewShedder(weighter.ShedPolicy{Above: 1.5, For: 1, MaxPerMinute: 2, MaxShare: 1, Progress: 0.2})
		require.NoError(t, err)
		k.shedder.Store(sh) // for: 1: every server's connections are looked up
		return k
	}
	// open reads through k and returns what is offered for the whale's
	// connection, the one connection to s1: its stream, or the connection
	// alone.
	open := func(k *kernelReader) weighter.ShedSession {
		t.Helper()
		servers, err := hb.Servers(ctx)
		require.NoError(t, err)
		got, err := k.ReadLocal(ctx, servers)
		require.NoError(t, err)
		require.Len(t, got.Open, 1, "the whale's connection is listed")
		return got.Open[0]
	}
	before := reader()
	found := open(before)
	require.Equal(t, client, found.Client, "the whale's stream found before the reload")

	h.ReloadSoft()
	after := open(before)
	assert.Empty(t, after.Client, "the old process's stream %s offered through the new process's socket", after.ID)
	assert.Zero(t, after.Serial)

	fresh := reader()
	dumps := counted.Count("show sess all")
	for range 5 {
		assert.Empty(t, open(fresh).Client)
		now = now.Add(haproxy.DefaultLocalBudget.Share)
	}
	assert.Equal(t, 1, counted.Count("show sess all")-dumps, "the new process asked for the old process's connection more than once")
}

package daemon

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
	assert.Equal(t, 2, strings.Count(logs.String(), "its old process still serves connections"), "said once by each reader")
	assert.Contains(t, logs.String(), fmt.Sprintf("old_pids=[%d]", old))
}

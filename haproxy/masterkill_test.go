package haproxy

import (
	"errors"
	"io"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// killMidReply listens on a unix socket of its own and passes each
// connection on to the master CLI at master; once after bytes of the
// master's reply it kills the worker, so that the worker dies in the middle
// of its reply. It is a fault injector in front of a real HAProxy.
func killMidReply(t *testing.T, master string, worker, bytes int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		defer client.Close()
		up, err := net.Dial("unix", master)
		if err != nil {
			return
		}
		defer up.Close()
		go func() { _, _ = io.Copy(up, client) }()
		_, _ = io.CopyN(client, up, int64(bytes))
		_ = syscall.Kill(worker, syscall.SIGKILL)
		_, _ = io.Copy(client, up)
	}()
	return path
}

// A worker that dies in the middle of a dump leaves the master to put its
// prompt after what came: a `show stat` cut there is an error, not the
// stats of the servers it got to.
func TestMasterCLIWorkerDiesMidReply(t *testing.T) {
	h := testenv.StartHAProxyMaster(t, "global\n  master-worker no-exit-on-failure\n"+bigConfig(20000))
	proxy := killMidReply(t, h.Socket, h.Worker(), 64<<10)
	c, err := New(Config{Socket: proxy, Master: true, Timeout: duration.Duration(5 * time.Second)})
	require.NoError(t, err)
	stats, err := c.Stats(testCtx(t), "be_big")
	require.Error(t, err, "%d servers' stats of 20000", len(stats))
	assert.True(t, errors.Is(err, ErrBadReply), "%v", err)
	t.Log(err)
}

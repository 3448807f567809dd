package haproxy

import (
	"errors"
	"fmt"
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
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// killMidReply is midReply killing the worker: the worker dies in the
// middle of its reply.
func killMidReply(t *testing.T, master string, worker, bytes int) string {
	return midReply(t, master, bytes, func() { _ = syscall.Kill(worker, syscall.SIGKILL) })
}

// midReply listens on a unix socket of its own and passes a connection on
// to the master CLI at master; after bytes of the master's reply it calls
// fault. It is a fault injector in front of a real HAProxy.
func midReply(t *testing.T, master string, bytes int, fault func()) string {
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
		fault()
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

// A reload in the middle of a batch of weights leaves some on the old
// worker: the batch is an error, or every weight it says it wrote is on the
// worker that is current after it.
func TestMasterCLIReloadMidBatch(t *testing.T) {
	const n = 1000
	h := testenv.StartHAProxyMaster(t, bigConfig(n))
	proxy := midReply(t, h.Socket, 2<<10, h.SignalReload)
	c, err := New(Config{Socket: proxy, Master: true, Timeout: duration.Duration(5 * time.Second)})
	require.NoError(t, err)
	changes := make([]weighter.Change, n)
	for i := range changes {
		changes[i] = weighter.Change{Server: fmt.Sprintf("s%d", i), Weight: 1 + i%200}
	}
	err = c.Backend("be_big").SetWeights(testCtx(t), changes)
	t.Logf("SetWeights: %.300v", err)
	if err != nil {
		return
	}
	direct, err := New(Config{Socket: h.Socket, Master: true, Timeout: duration.Duration(5 * time.Second)})
	require.NoError(t, err)
	var got map[string]weighter.ServerState
	testenv.WaitFor(t, "the current worker's weights", func() bool {
		servers, err := direct.Backend("be_big").Servers(testCtx(t))
		got = map[string]weighter.ServerState{}
		for _, s := range servers {
			got[s.Name] = s
		}
		return err == nil
	})
	for _, ch := range changes {
		assert.Equal(t, ch.Weight, got[ch.Server].Weight, "%s: said written", ch.Server)
	}
}

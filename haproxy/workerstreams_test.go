package haproxy

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestWorkerStreamsOfOldWorker: through the master CLI, after a reload the
// stream of a connection the old worker still serves is found in that
// worker (WorkerStreams with its pid), not in the current one, and is named
// by it (Ref: 0x…@!<pid>). ShutdownSession with that Ref closes it in the
// old worker; once the old worker has exited, it is gone (ErrNoSession) and
// the worker's streams cannot be read (ErrNoWorker).
func TestWorkerStreamsOfOldWorker(t *testing.T) {
	srv := startPeerRecorder(t)
	fe := testenv.FreePort(t)
	h := testenv.StartHAProxyMaster(t, testenv.HAProxyDefaults+fmt.Sprintf(
		"frontend fe\n  bind 127.0.0.1:%d\n  default_backend be\nbackend be\n  server s1 %s\n", fe, srv.addr))
	c, err := New(Config{Socket: h.Socket, Master: true})
	require.NoError(t, err)
	b := c.Backend("be")
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", fe))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("x"))
	require.NoError(t, err)
	testenv.WaitFor(t, "the connection at the server", func() bool { return len(srv.seen()) == 1 })
	side := ServerConn{Local: srv.seen()[0], Remote: netip.MustParseAddrPort(srv.addr)}
	old := h.Worker()
	current := h.Reload()

	now, err := b.WorkerStreams(testCtx(t), current, "s1")
	require.NoError(t, err)
	assert.Empty(t, now.Streams, "the current worker has no stream of the old worker's connection")
	assert.Equal(t, current, now.PID)
	got, err := b.WorkerStreams(testCtx(t), old, "s1")
	require.NoError(t, err)
	assert.Equal(t, old, got.PID)
	s, ok := got.Streams[side]
	require.True(t, ok, "no stream for %v in the old worker: %v", side, got.Streams)
	assert.Equal(t, old, s.Worker)
	assert.Equal(t, s.ID+"@!"+strconv.Itoa(old), s.Ref())
	assert.Equal(t, conn.LocalAddr().String(), s.Client)

	var mu sync.Mutex
	var sent []string
	c.trace = func(cmds []string) { mu.Lock(); sent = append(sent, cmds...); mu.Unlock() }
	other := s
	other.Client = "127.0.0.1:1"
	require.ErrorIs(t, b.ShutdownStream(testCtx(t), other), ErrNoSession, "a stream of another client is not closed")
	require.NoError(t, b.ShutdownSession(testCtx(t), s.Ref()))
	buf := make([]byte, 1)
	_, err = conn.Read(buf) // the sink sends nothing: this returns when HAProxy closes
	require.Error(t, err, "the connection is still open")
	t.Logf("sent: %q", sent)

	testenv.WaitFor(t, "the old worker gone", func() bool {
		pids, err := c.Processes(testCtx(t))
		return err == nil && len(pids) == 1
	})
	require.ErrorIs(t, b.ShutdownSession(testCtx(t), s.Ref()), ErrNoSession)
	_, err = b.WorkerStreams(testCtx(t), old, "s1")
	require.ErrorIs(t, err, ErrNoWorker)
}

// A Ref that does not name a stream and a worker as HAProxy prints them,
// or names a worker on a socket that is not the master CLI, is refused
// before anything is sent.
func TestShutdownRefRefused(t *testing.T) {
	for _, master := range []bool{false, true} {
		c, err := New(Config{Socket: "/nonexistent.sock", Master: master})
		require.NoError(t, err)
		c.trace = func(cmds []string) { t.Errorf("sent %q", cmds) }
		refs := []string{"0x1@!", "0x1@!x", "0x1@!0", "0x1@!-3", "0x1@!012", "0x1@!12 show", "0x1@!12;x", "0xZ@!12", "@!12"}
		if !master {
			refs = append(refs, "0x1@!12")
		}
		for _, ref := range refs {
			assert.ErrorIs(t, c.Backend("be").ShutdownSession(testCtx(t), ref), ErrInvalidSessionID, "%q (master %v)", ref, master)
		}
	}
}

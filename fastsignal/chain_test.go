package fastsignal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/sockdiag"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// stepReader is a fault-injecting fast reader: its server s1 carries perRead
// more bytes at each read, from its own base; err, when set, fails the read.
// seen is what its sees() says (the kernel's probe after ErrNotVisible).
type stepReader struct {
	base, perRead float64
	err           error
	seen          bool
	reads         int
}

func (r *stepReader) ReadLocal(context.Context, []weighter.ServerState) (weighter.LocalRead, error) {
	if r.err != nil {
		return weighter.LocalRead{}, r.err
	}
	r.reads++
	at := time.Unix(int64(1000+r.reads), 0)
	return weighter.LocalRead{At: at, Since: at.Add(-time.Second), Servers: map[string]weighter.LocalCounter{
		"s1": {Bytes: r.base + float64(r.reads)*r.perRead, Rate: r.perRead, Sessions: 1},
	}}, nil
}

func (r *stepReader) sees() bool { return r.seen }

// TestFastChainOrder: the fast signal reads the kernel's socket table,
// then show sess all, then show stat, then nothing (the source alone), each
// step down said once with why; a reader that failed is tried again after
// retryBetter (the kernel, after ErrNotVisible, used again only once it
// sees a connection); the counter goes on across a change of reader, with
// no rate at the change.
func TestFastChainOrder(t *testing.T) {
	var logs testenv.SyncBuffer
	kernel := &stepReader{base: 1e9, perRead: 100}
	sessions := &stepReader{base: 5e3, perRead: 10}
	stat := &stepReader{base: 7e6, perRead: 1}
	c := newChain("be", kernel, sessions, stat, slog.New(slog.NewTextHandler(&logs, nil)))
	now := time.Unix(0, 0)
	c.now = func() time.Time { return now }
	ctx := context.Background()
	read := func() weighter.LocalRead {
		t.Helper()
		got, err := c.ReadLocal(ctx, testenv.Servers("s1"))
		require.NoError(t, err)
		return got
	}
	steps := func() int { return strings.Count(logs.String(), `msg="fast signal reader failing"`) }

	got := read()
	assert.Equal(t, ReaderKernel, got.Reader, "the kernel's socket table first")
	first := got.Servers["s1"].Bytes
	got = read()
	assert.Equal(t, first+100, got.Servers["s1"].Bytes)
	assert.False(t, got.Servers["s1"].Reset)

	// Not visible: show sess all, from where the counter was, no rate.
	kernel.err = &sockdiag.NotVisibleError{Reason: "HAProxy's process 1 is in network namespace net:[1], the table read is net:[2]"}
	got = read()
	assert.Equal(t, ReaderSessions, got.Reader)
	assert.Equal(t, first+100, got.Servers["s1"].Bytes, "the counter goes on across the change")
	assert.True(t, got.Servers["s1"].Reset)
	assert.Equal(t, 0.0, got.Servers["s1"].Rate)
	got = read()
	assert.Equal(t, first+110, got.Servers["s1"].Bytes)
	assert.Equal(t, 10.0, got.Servers["s1"].Rate)
	assert.Equal(t, 1, steps())
	assert.Contains(t, logs.String(), `msg="fast signal reader failing"`)
	assert.Contains(t, logs.String(), `reader=kernel reason="not visible: the daemon is not in HAProxy's network namespace" next=sessions retry_every=1m0s`)
	kernelReads := kernel.reads

	// show sess all fails: show stat. Then show stat too: none.
	sessions.err = errors.New("show sess all: haproxy: dial: connection refused")
	got = read()
	assert.Equal(t, ReaderStat, got.Reader)
	assert.Equal(t, first+110, got.Servers["s1"].Bytes)
	stat.err = errors.New("show stat: connection refused")
	_, err := c.ReadLocal(ctx, testenv.Servers("s1"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no fast signal reader works")
	assert.Contains(t, logs.String(), `msg="fast signal cannot be read" reader=none`)
	for range 3 {
		_, err = c.ReadLocal(ctx, testenv.Servers("s1"))
		require.Error(t, err)
	}
	assert.Equal(t, 3, steps(), "each step down said once")

	// A minute on: everything is tried again; the kernel still sees no
	// connection, so show sess all, which works again, is used.
	sessions.err, stat.err, kernel.err = nil, nil, nil
	now = now.Add(retryBetter)
	got = read()
	assert.Equal(t, ReaderSessions, got.Reader, "the kernel is used again only once it sees HAProxy's connections")
	assert.Equal(t, kernelReads+1, kernel.reads, "the kernel was tried")
	assert.True(t, got.Servers["s1"].Reset)
	assert.Equal(t, first+110, got.Servers["s1"].Bytes)
	assert.Contains(t, logs.String(), `msg="fast signal reader back" reader=sessions`)

	now = now.Add(retryBetter)
	kernel.seen = true
	got = read()
	assert.Equal(t, ReaderKernel, got.Reader)
	assert.Equal(t, first+110, got.Servers["s1"].Bytes)
	got = read()
	assert.Equal(t, first+210, got.Servers["s1"].Bytes)
	assert.Contains(t, logs.String(), `msg="fast signal reader back" reader=kernel`)
	t.Log(logs.String())
}

// TestFastChainWhy: the log line names the cause a user can act on.
func TestFastChainWhy(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("socket table: %w", &sockdiag.NotVisibleError{Reason: "x"}):  "not in HAProxy's network namespace",
		fmt.Errorf("socket table: %w: %w", sockdiag.ErrNoSocket, syscall.EPERM): "no NETLINK_SOCK_DIAG socket",
	} {
		assert.Contains(t, why(ReaderKernel, err), want)
	}
}

// TestFastChainWhyByValueNotText: the cause is told by the error's value;
// a message that merely mentions NETLINK_SOCK_DIAG (a dump that failed
// after the socket opened) is not a missing socket.
func TestFastChainWhyByValueNotText(t *testing.T) {
	err := errors.New("socket table: NETLINK_SOCK_DIAG dump: message truncated")
	assert.Equal(t, "the read failed", why(ReaderKernel, err))
}

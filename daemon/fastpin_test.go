package daemon

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestFastChainPinned: fast_signal kernel, sessions or stat keeps that
// reader alone (the config's values are the chain's reader names): it is
// read even when a better one works, and when it fails the read fails (the
// source weighs alone) instead of stepping down to a reader not chosen. on
// keeps the whole chain.
func TestFastChainPinned(t *testing.T) {
	for _, pin := range []string{config.FastKernel, config.FastSessions, config.FastStat} {
		readers := map[string]*stepReader{readerKernel: {perRead: 100}, readerSessions: {perRead: 10}, readerStat: {perRead: 1}}
		c := newFastChain("be", readers[readerKernel], readers[readerSessions], readers[readerStat], slog.New(slog.DiscardHandler)).pinned(pin)
		ctx := context.Background()
		got, err := c.ReadLocal(ctx, testenv.Servers("s1"))
		require.NoError(t, err, pin)
		assert.Equal(t, pin, got.Reader)
		readers[pin].err = errors.New("broken")
		_, err = c.ReadLocal(ctx, testenv.Servers("s1"))
		require.Error(t, err, pin)
		assert.Contains(t, err.Error(), "no fast signal reader works", pin)
		for name, r := range readers {
			if name != pin {
				assert.Zero(t, r.reads, "%s pinned: %s was read", pin, name)
			}
		}
	}
	kernel := &stepReader{err: errors.New("broken")}
	c := newFastChain("be", kernel, &stepReader{perRead: 10}, &stepReader{perRead: 1}, slog.New(slog.DiscardHandler)).pinned(config.FastOn)
	got, err := c.ReadLocal(context.Background(), testenv.Servers("s1"))
	require.NoError(t, err)
	assert.Equal(t, readerSessions, got.Reader, "on: the whole chain")
}

// TestFastSignalSessionsPinned: a daemon with fast_signal: sessions on a
// real HAProxy, where the kernel's socket table can be read, weighs by show
// sess all and says so in each server's reason.
func TestFastSignalSessionsPinned(t *testing.T) {
	h := testenv.StartTwoServers(t, [2]string{testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)}, "weight 100")
	h.Client(t, 2000, 20*time.Millisecond)
	h.Client(t, 200, 20*time.Millisecond)
	counted := startCommandCounter(t, h.Socket)
	ctx := testenv.Context(t, 30*time.Second)
	got, err := New(kernelConfig(t, counted.Socket, "    fast_signal: sessions\n"), Options{}).RunOnce(ctx, false)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NotNil(t, got[0].Signal)
	assert.Equal(t, readerSessions, got[0].Signal.Reader)
	for _, s := range got[0].Plan.Servers {
		assert.Contains(t, s.Reason, "; reader sessions", "server %s", s.Server)
	}
	assert.Positive(t, counted.count("show sess"), "show sess all was not read")
}

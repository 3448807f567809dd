package fastsignal

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFastChainPinned: fast_signal kernel, sessions or stat keeps that
// reader alone (the config's values are the chain's reader names): it is
// read even when a better one works, and when it fails the read fails (the
// source weighs alone) instead of stepping down to a reader not chosen. on
// keeps the whole chain.
func TestFastChainPinned(t *testing.T) {
	for _, pin := range []string{config.FastKernel, config.FastSessions, config.FastStat} {
		readers := map[string]*stepReader{ReaderKernel: {perRead: 100}, ReaderSessions: {perRead: 10}, ReaderStat: {perRead: 1}}
		c := newChain("be", readers[ReaderKernel], readers[ReaderSessions], readers[ReaderStat], slog.New(slog.DiscardHandler)).Pinned(pin)
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
	c := newChain("be", kernel, &stepReader{perRead: 10}, &stepReader{perRead: 1}, slog.New(slog.DiscardHandler)).Pinned(config.FastOn)
	got, err := c.ReadLocal(context.Background(), testenv.Servers("s1"))
	require.NoError(t, err)
	assert.Equal(t, ReaderSessions, got.Reader, "on: the whole chain")
}

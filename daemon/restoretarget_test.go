package daemon

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// snapshottingTarget is a restorer that records its calls in order.
type snapshottingTarget struct {
	fakeTarget
	calls       []string
	snapErr     error
	restoreErr  error
	snapshotted bool
}

func newSnapshottingTarget() *snapshottingTarget {
	return &snapshottingTarget{fakeTarget: fakeTarget{weights: map[string]int{"s1": 10, "s2": 20}}}
}

func (s *snapshottingTarget) Servers(ctx context.Context) ([]weighter.ServerState, error) {
	s.calls = append(s.calls, "servers")
	return s.fakeTarget.Servers(ctx)
}

func (s *snapshottingTarget) SetWeights(ctx context.Context, ch []weighter.Change) error {
	s.calls = append(s.calls, "set")
	return s.fakeTarget.SetWeights(ctx, ch)
}

func (s *snapshottingTarget) Snapshot(context.Context) (map[string]int, error) {
	s.calls = append(s.calls, "snapshot")
	if s.snapErr != nil {
		return nil, s.snapErr
	}
	s.snapshotted = true
	return map[string]int{"s1": 10, "s2": 20}, nil
}

func (s *snapshottingTarget) Restore(context.Context) error {
	s.calls = append(s.calls, "restore")
	return s.restoreErr
}

// TestRestoringTargetKeepsBeforeFirstRead: the start-up weights are kept
// before the target's first read, once; a failure to keep them fails reads and
// writes alike, so nothing is written that could not be restored.
func TestRestoringTargetKeepsBeforeFirstRead(t *testing.T) {
	ctx := context.Background()
	sw := newStartWeights(slog.New(slog.DiscardHandler))
	inner := newSnapshottingTarget()
	inner.snapErr = errors.New("connection refused")
	tgt := sw.wrap("be", inner)

	_, err := tgt.Servers(ctx)
	require.ErrorIs(t, err, inner.snapErr)
	require.ErrorIs(t, tgt.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 1}}), inner.snapErr)
	assert.Equal(t, []string{"snapshot", "snapshot"}, inner.calls, "nothing read or written before the snapshot")
	assert.False(t, sw.has("be"))

	inner.snapErr, inner.calls = nil, nil
	_, err = tgt.Servers(ctx)
	require.NoError(t, err)
	require.NoError(t, tgt.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 1}}))
	assert.Equal(t, []string{"snapshot", "servers", "set"}, inner.calls)
	assert.True(t, sw.has("be"))
}

// TestRestoringTargetAcrossReload: the target a reload builds for a backend
// still configured takes no new snapshot (the weights are the daemon's by
// then); the restore goes through the one that kept them, and drops them
// only when it succeeded.
func TestRestoringTargetAcrossReload(t *testing.T) {
	ctx := context.Background()
	sw := newStartWeights(slog.New(slog.DiscardHandler))
	first, second := newSnapshottingTarget(), newSnapshottingTarget()
	_, err := sw.wrap("be", first).Servers(ctx)
	require.NoError(t, err)
	_, err = sw.wrap("be", second).Servers(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"servers"}, second.calls, "a second snapshot after a reload")

	first.restoreErr = errors.New("socket gone")
	err = sw.restore(ctx, time.Second, []string{"be", "never-kept"}, "restore_on_exit")
	require.ErrorIs(t, err, first.restoreErr)
	assert.ErrorContains(t, err, "restore_on_exit: backend be:")
	assert.True(t, sw.has("be"), "a failed restore keeps the start-up weights")

	first.restoreErr = nil
	require.NoError(t, sw.restore(ctx, time.Second, []string{"be"}, "restore_on_exit"))
	assert.False(t, sw.has("be"))
	assert.NotContains(t, second.calls, "restore")
}

// TestWrapLeavesOtherTargets: a target that cannot restore (IPVS) is not wrapped.
func TestWrapLeavesOtherTargets(t *testing.T) {
	sw := newStartWeights(slog.New(slog.DiscardHandler))
	tgt := &fakeTarget{weights: map[string]int{}}
	assert.Same(t, tgt, sw.wrap("be", tgt))
}

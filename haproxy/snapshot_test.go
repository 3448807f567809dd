package haproxy

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestRestoreAfterRestartAndNewServer: weights the daemon set on a server that
// did not exist at Snapshot time must not outlive it, and after HAProxy was
// restarted with a new configured weight, Restore must not put the old one back.
func TestRestoreAfterRestartAndNewServer(t *testing.T) {
	h, c, b, ctx := startAppBackend(t)
	mustSnapshot(ctx, t, b)

	// The operator changes s2's configured weight 20 -> 30 and restarts HAProxy.
	cfg, err := os.ReadFile(h.Config)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(cfg), "weight 20"))
	require.NoError(t, os.WriteFile(h.Config, []byte(strings.Replace(string(cfg), "weight 20", "weight 30", 1)), 0o600))
	h.Restart()
	assert.Contains(t, raw(t, c, "add server be_app/s9 127.0.0.1:1 weight 4"), "New server registered")

	// The daemon then sets its own weights, including a drain of the new server.
	require.NoError(t, b.SetWeights(ctx, []weighter.Change{
		{Server: "s1", Weight: 50}, {Server: "s2", Weight: 5}, {Server: "s9", Weight: 0}}))
	got := restoreAndRead(ctx, t, b)
	assert.Equal(t, 1, got["s1"].Weight, "snapshot weight")
	assert.Equal(t, 30, got["s2"].Weight, "the new configured weight, not the snapshot's 20")
	assert.Equal(t, 4, got["s9"].Weight, "a server added since the snapshot gets its initial weight")
}

// TestRestoreLeavesOperatorDrain: a server an operator drained by weight 0
// while the daemon ran (`set weight be/s 0`, which the cycles leave alone)
// must stay drained when the daemon exits; a server the daemon drained itself
// gets its start-up weight back. The writes go through another Client, as
// after a reload that changes the socket's settings: the daemon hands both
// its one record of its drains.
func TestRestoreLeavesOperatorDrain(t *testing.T) {
	h := testenv.StartHAProxy(t, appConfig(t))
	zeroes := &ownzero.Record{}
	c := newClient(t, h.Socket, OwnZeroes(zeroes))
	b, ctx := c.Backend("be_app"), testCtx(t)
	mustSnapshot(ctx, t, b)

	reloaded := newClient(t, h.Socket, OwnZeroes(zeroes)).Backend("be_app")
	require.NoError(t, reloaded.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 5}, {Server: "s2", Weight: 0}}))
	require.Empty(t, raw(t, c, "set weight be_app/s1 0"), "the operator drains s1")

	got := restoreAndRead(ctx, t, b)
	assert.Equal(t, 0, got["s1"].Weight, "the operator's drain stays")
	assert.Equal(t, 20, got["s2"].Weight, "the daemon's drain is undone")
}

// TestRestoreLeavesAnotherRecordsDrain: a drain written through a Client
// with another record of drains (another daemon in the process, a tool) is
// not this one's to undo: the record is its owner's, not the package's.
func TestRestoreLeavesAnotherRecordsDrain(t *testing.T) {
	h, _, b, ctx := startAppBackend(t)
	mustSnapshot(ctx, t, b)

	other := newClient(t, h.Socket).Backend("be_app") // a record of its own
	require.NoError(t, other.SetWeights(ctx, []weighter.Change{{Server: "s2", Weight: 0}}))

	assert.Equal(t, 0, restoreAndRead(ctx, t, b)["s2"].Weight, "the other's drain stays")
}

// TestRestoreDoesNotDrainALiftedServer: a server at weight 0 when the daemon
// started (an operator's drain, or one a daemon before it left) that the
// operator put back in service since must not be drained again when the
// daemon exits: it gets its configured weight, not the 0 of the snapshot.
func TestRestoreDoesNotDrainALiftedServer(t *testing.T) {
	_, c, b, ctx := startAppBackend(t)
	require.Empty(t, raw(t, c, "set weight be_app/s2 0"), "s2 drained before the daemon starts")
	mustSnapshot(ctx, t, b)
	require.Empty(t, raw(t, c, "set weight be_app/s2 12"), "the operator puts s2 back")
	require.Empty(t, raw(t, c, "set weight be_app/s4 8"), "and s4, configured at 0")
	require.NoError(t, b.SetWeights(ctx, []weighter.Change{{Server: "s2", Weight: 37}, {Server: "s4", Weight: 30}}))

	got := restoreAndRead(ctx, t, b)
	assert.Equal(t, 20, got["s2"].Weight, "the configured weight, not the snapshot's 0")
	assert.Equal(t, 30, got["s4"].Weight, "no configured weight to give but 0: left in service as it is")
}

// TestRestoreLeavesOperatorDrainAfterHAProxyRestart: the daemon drained s2,
// HAProxy restarted (s2 back at its configured weight, which the next read
// sees), then an operator drained s2: that 0 is the operator's, not the
// daemon's old one, and stays.
func TestRestoreLeavesOperatorDrainAfterHAProxyRestart(t *testing.T) {
	h, c, b, ctx := startAppBackend(t)
	mustSnapshot(ctx, t, b)
	require.NoError(t, b.SetWeights(ctx, []weighter.Change{{Server: "s2", Weight: 0}}))
	h.Restart()
	require.Equal(t, 20, byName(t, b)["s2"].Weight, "the new process has the configured weight")
	require.Empty(t, raw(t, c, "set weight be_app/s2 0"), "the operator drains s2")

	assert.Equal(t, 0, restoreAndRead(ctx, t, b)["s2"].Weight, "the operator's drain stays")
}

// startAppBackend starts HAProxy with appConfig and returns it, a client of
// it, that client's be_app and a context for the calls that ends with the test.
func startAppBackend(t *testing.T) (*testenv.HAProxy, *Client, *RuntimeBackend, context.Context) {
	t.Helper()
	h := testenv.StartHAProxy(t, appConfig(t))
	c := newClient(t, h.Socket)
	return h, c, c.Backend("be_app"), testCtx(t)
}

// mustSnapshot keeps b's weights of now, as the daemon does at start-up.
func mustSnapshot(ctx context.Context, t *testing.T, b *RuntimeBackend) {
	t.Helper()
	_, err := b.Snapshot(ctx)
	require.NoError(t, err)
}

// restoreAndRead restores b, as the daemon does at exit, and reads its servers back.
func restoreAndRead(ctx context.Context, t *testing.T, b *RuntimeBackend) map[string]weighter.ServerState {
	t.Helper()
	require.NoError(t, b.Restore(ctx))
	return byName(t, b)
}

// TestServersSayWhichZeroIsOwn: a read says which weight 0 is this
// process's own (written through the Client's record), so that the cycles
// resume it and leave an operator's alone.
func TestServersSayWhichZeroIsOwn(t *testing.T) {
	_, c, b, ctx := startAppBackend(t)
	require.NoError(t, b.SetWeights(ctx, []weighter.Change{{Server: "s2", Weight: 0}}))
	require.Empty(t, raw(t, c, "set weight be_app/s1 0"), "the operator drains s1")
	got := byName(t, b)
	assert.False(t, got["s1"].OwnZero, "the operator's")
	assert.True(t, got["s2"].OwnZero, "the process's own")
}

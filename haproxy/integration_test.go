package haproxy

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func TestServersReadsWeightsAndStates(t *testing.T) {
	h := testenv.StartHAProxy(t, appConfig(t))
	c := newClient(t, h.Socket)
	require.Empty(t, raw(t, c, "set server be_app/s2 state drain"))

	got := byName(t, c.Backend("be_app"))
	require.Len(t, got, 4)
	assert.Equal(t, 1, got["s1"].Weight)
	assert.Equal(t, 1, got["s1"].InitialWeight)
	assert.Equal(t, weighter.AdminReady, got["s1"].Admin)
	assert.Equal(t, "up", got["s1"].Operational)
	assert.Regexp(t, `^127\.0\.0\.1:\d+$`, got["s1"].Address)
	assert.Equal(t, 20, got["s2"].Weight)
	assert.Equal(t, weighter.AdminDrain, got["s2"].Admin, "operator drain")
	assert.Equal(t, weighter.AdminMaint, got["s3"].Admin, "disabled in the configuration")
	assert.Equal(t, "down", got["s3"].Operational)
	// HAProxy shows weight 0 as DRAIN in show stat; it is not an admin drain.
	assert.Equal(t, 0, got["s4"].Weight)
	assert.Equal(t, weighter.AdminReady, got["s4"].Admin)

	// Enabled at runtime, a server "disabled" in the configuration serves
	// again; HAProxy keeps only the CMAINT bit (srv_admin_state 4) to remember
	// the configuration, and counts it as ready.
	require.Empty(t, raw(t, c, "enable server be_app/s3"))
	got = byName(t, c.Backend("be_app"))
	assert.Equal(t, weighter.AdminReady, got["s3"].Admin, "enabled at runtime")
	assert.Equal(t, "up", got["s3"].Operational)
}

func TestSetWeightsBatchReadsBack(t *testing.T) {
	h := testenv.StartHAProxy(t, appConfig(t))
	for _, socket := range []string{h.Socket, h.TCPSocket} {
		b := newClient(t, socket).Backend("be_app")
		want := []weighter.Change{{Server: "s1", Weight: 7}, {Server: "s2", Weight: 256}, {Server: "s4", Weight: 1}}
		if socket == h.TCPSocket {
			want = []weighter.Change{{Server: "s1", Weight: 0}, {Server: "s2", Weight: 3}, {Server: "s4", Weight: 99}}
		}
		require.NoError(t, b.SetWeights(testCtx(t), want), socket)
		got := byName(t, b)
		for _, ch := range want {
			assert.Equal(t, ch.Weight, got[ch.Server].Weight, "%s via %s", ch.Server, socket)
		}
		assert.Equal(t, weighter.AdminMaint, got["s3"].Admin, "state untouched")
	}
}

func TestNoSuchBackendOrServer(t *testing.T) {
	h := testenv.StartHAProxy(t, appConfig(t))
	c := newClient(t, h.Socket)
	ctx := testCtx(t)

	_, err := c.Backend("nope").Servers(ctx)
	require.ErrorIs(t, err, ErrNoBackend)
	require.ErrorIs(t, c.Backend("nope").Check(ctx), ErrNoBackend)
	_, err = c.Stats(ctx, "nope")
	require.ErrorIs(t, err, ErrNoBackend)

	b := c.Backend("be_app")
	err = b.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 5}, {Server: "ghost", Weight: 5}})
	require.ErrorIs(t, err, ErrNoServer)
	var se *weighter.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "ghost", se.Server)
	assert.Equal(t, 5, byName(t, b)["s1"].Weight, "the other server of the batch is written")
}

func TestInvalidWeightSendsNothing(t *testing.T) {
	h := testenv.StartHAProxy(t, appConfig(t))
	b := newClient(t, h.Socket).Backend("be_app")
	for _, bad := range []int{257, -1, 667} {
		err := b.SetWeights(testCtx(t), []weighter.Change{{Server: "s1", Weight: 9}, {Server: "s2", Weight: bad}})
		require.ErrorIs(t, err, ErrInvalidWeight, "weight %d", bad)
		assert.Equal(t, 1, byName(t, b)["s1"].Weight, "valid change of a refused batch not sent")
	}
	err := b.SetWeights(testCtx(t), []weighter.Change{{Server: "s1;disable server be_app/s2", Weight: 9}})
	require.Error(t, err)
	assert.Equal(t, weighter.AdminReady, byName(t, b)["s2"].Admin)
}

func TestCheckAlgorithms(t *testing.T) {
	h := testenv.StartHAProxy(t, appConfig(t))
	c := newClient(t, h.Socket)
	ctx := testCtx(t)

	require.NoError(t, c.Backend("be_app").Check(ctx))
	require.NoError(t, c.Backend("be_consistent").Check(ctx))
	assert.Equal(t, 3, byName(t, c.Backend("be_consistent"))["s1"].Weight, "probe put the weight back")

	err := c.Backend("be_static").Check(ctx)
	require.ErrorIs(t, err, ErrStaticWeights)
	assert.Contains(t, err.Error(), "static-rr")
	err = c.Backend("be_map").Check(ctx)
	require.ErrorIs(t, err, ErrStaticWeights)
	assert.Contains(t, err.Error(), "map-based")
	assert.Equal(t, 3, byName(t, c.Backend("be_map"))["s1"].Weight)

	// And when a write is refused anyway, the error says why.
	err = c.Backend("be_static").SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 7}})
	require.ErrorIs(t, err, ErrStaticWeights)
}

func TestRuntimeAddedAndDeletedServersAreSeen(t *testing.T) {
	h := testenv.StartHAProxy(t, appConfig(t))
	c := newClient(t, h.Socket)
	b := c.Backend("be_app")
	require.Len(t, byName(t, b), 4)
	assert.Contains(t, raw(t, c, "add server be_app/s9 127.0.0.1:1 weight 4"), "New server registered")
	got := byName(t, b)
	require.Contains(t, got, "s9")
	assert.Equal(t, 4, got["s9"].Weight)
	assert.Equal(t, weighter.AdminMaint, got["s9"].Admin, "added servers start in maint")

	assert.Empty(t, raw(t, c, "disable server be_app/s1"))
	assert.Contains(t, raw(t, c, "del server be_app/s1"), "Server deleted")
	got = byName(t, b)
	assert.NotContains(t, got, "s1")
	assert.Len(t, got, 4)
}

func TestSnapshotRestore(t *testing.T) {
	h := testenv.StartHAProxy(t, appConfig(t))
	b := newClient(t, h.Socket).Backend("be_app")
	ctx := testCtx(t)
	require.NoError(t, b.Restore(ctx), "restore without snapshot is a no-op")
	snap, err := b.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"s1": 1, "s2": 20, "s3": 1, "s4": 0}, snap)

	require.NoError(t, b.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 50}, {Server: "s2", Weight: 2}}))
	require.NoError(t, b.Restore(ctx))
	got := byName(t, b)
	assert.Equal(t, 1, got["s1"].Weight)
	assert.Equal(t, 20, got["s2"].Weight)
}

func TestThousandServers(t *testing.T) {
	h := testenv.StartHAProxy(t, bigConfig(1000))
	b := newClient(t, h.Socket).Backend("be_big")
	ctx := testCtx(t)
	servers, err := b.Servers(ctx)
	require.NoError(t, err)
	require.Len(t, servers, 1000)

	changes := make([]weighter.Change, len(servers))
	for i, s := range servers {
		changes[i] = weighter.Change{Server: s.Name, Weight: 1 + i%256}
	}
	require.NoError(t, b.SetWeights(ctx, changes))
	got := byName(t, b)
	for _, ch := range changes {
		if got[ch.Server].Weight != ch.Weight {
			t.Fatalf("%s: weight %d, want %d", ch.Server, got[ch.Server].Weight, ch.Weight)
		}
	}
	stats, err := newClient(t, h.Socket).Stats(ctx, "be_big")
	require.NoError(t, err)
	assert.Len(t, stats, 1000)
}

func TestErrorsWrapSentinels(t *testing.T) {
	// The sentinels must survive the wrapping done for context.
	err := classify(errors.New("No such server."))
	require.ErrorIs(t, err, ErrNoServer)
	require.ErrorIs(t, classify(errors.New("Can't find backend.")), ErrNoBackend)
}

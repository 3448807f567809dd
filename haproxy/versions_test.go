package haproxy

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The runtime API the daemon uses, against every HAProxy a Debian user has
// (testenv.HAProxyVersions: Debian 12's 2.6, trixie's 3.0, sid's 3.2,
// experimental's 3.4): weights written and read back, `show stat`, streams
// listed and one shut down, the fast signal of an open connection, and all of
// it through the master CLI. The other tests run 2.6 only; this one is where
// a newer HAProxy that answers differently shows up.
func TestHAProxyVersions(t *testing.T) {
	for _, version := range testenv.HAProxyVersions() {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			front := testenv.FreePort(t)
			h := testenv.StartHAProxyVersion(t, version, masterConfig(t, front))
			c := newClient(t, h.Socket)
			t.Run("weights", func(t *testing.T) { checkVersionWeights(t, c) })
			t.Run("show stat", func(t *testing.T) { checkVersionStats(t, c, front) })
			t.Run("streams and shutdown session", func(t *testing.T) { checkVersionShutdown(t, c, front) })
			t.Run("fast signal", func(t *testing.T) { checkVersionFastSignal(t, c, front) })
			t.Run("master CLI", func(t *testing.T) { checkVersionMaster(t, version) })
		})
	}
}

// checkVersionWeights: appConfig's be_app read as configured, weights set
// (`set server … weight`) and read back (`show servers state`), errors
// named, algorithms told apart.
func checkVersionWeights(t *testing.T, c *Client) {
	ctx := testCtx(t)
	b := c.Backend("be_app")
	got := byName(t, b)
	require.Len(t, got, 4)
	assert.Equal(t, weighter.ServerState{Name: "s1", Address: got["s1"].Address, Weight: 1, InitialWeight: 1,
		Admin: weighter.AdminReady, Operational: "up"}, got["s1"])
	assert.Equal(t, 20, got["s2"].Weight)
	assert.Equal(t, weighter.AdminMaint, got["s3"].Admin)
	assert.Equal(t, 0, got["s4"].Weight)
	assert.True(t, strings.HasPrefix(got["s1"].Address, "127.0.0.1:"), got["s1"].Address)

	require.NoError(t, b.Check(ctx))
	require.NoError(t, c.Backend("be_consistent").Check(ctx))
	require.ErrorIs(t, c.Backend("be_static").Check(ctx), ErrStaticWeights)
	require.ErrorIs(t, c.Backend("be_map").Check(ctx), ErrStaticWeights)
	require.ErrorIs(t, c.Backend("nope").Check(ctx), ErrNoBackend)

	want := []weighter.Change{{Server: "s1", Weight: 7}, {Server: "s2", Weight: 256}, {Server: "s4", Weight: 1}}
	require.NoError(t, b.SetWeights(ctx, want))
	got = byName(t, b)
	for _, ch := range want {
		assert.Equal(t, ch.Weight, got[ch.Server].Weight, ch.Server)
	}
	assert.Equal(t, 1, got["s1"].InitialWeight, "the initial weight stays the configured one")
	assert.Contains(t, raw(t, c, "get weight be_app/s1"), "7 (initial 1)")

	err := b.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 5}, {Server: "ghost", Weight: 5}})
	require.ErrorIs(t, err, ErrNoServer)
	assert.Equal(t, 5, byName(t, b)["s1"].Weight, "the other server of the batch is written")
	_, err = c.Backend("nope").Servers(ctx)
	require.ErrorIs(t, err, ErrNoBackend)
}

// checkVersionStats: `show stat` parses, one row per server, and counts the
// bytes of a connection once it closed (no contstats).
func checkVersionStats(t *testing.T, c *Client, front int) {
	ctx := testCtx(t)
	stats, err := c.Stats(ctx, "be_app")
	require.NoError(t, err)
	var names []string
	for _, s := range stats {
		names = append(names, s.Server)
	}
	assert.ElementsMatch(t, []string{"s1", "s2", "s3", "s4"}, names)
	_, err = c.Stats(ctx, "nope")
	require.ErrorIs(t, err, ErrNoBackend)

	before := liveStat(t, c)
	conn := dialFront(t, front)
	write(t, conn, 4_321)
	testenv.WaitFor(t, "the stream on l1", func() bool { return liveStat(t, c).CurrentSessions == before.CurrentSessions+1 })
	require.NoError(t, conn.Close())
	testenv.WaitFor(t, "the closed connection's bytes in show stat", func() bool {
		s := liveStat(t, c)
		return s.CurrentSessions == before.CurrentSessions && s.BytesIn == before.BytesIn+4_321
	})
	after := liveStat(t, c)
	assert.Equal(t, before.SessionsTotal+1, after.SessionsTotal)
	assert.Equal(t, before.BytesOut, after.BytesOut, "the discard server sends nothing")
}

// liveStat is be_live's one server's `show stat` row.
func liveStat(t *testing.T, c *Client) ServerStat {
	t.Helper()
	stats, err := c.Stats(testCtx(t), "be_live")
	require.NoError(t, err)
	require.Len(t, stats, 1)
	require.Equal(t, "l1", stats[0].Server)
	return stats[0]
}

// checkVersionShutdown: two open connections are listed as be_live's streams
// (`show sess all`); one shut down (`show sess <id>`, `shutdown session`)
// ends for its client, the other stays open and listed.
func checkVersionShutdown(t *testing.T, c *Client, front int) {
	ctx := testCtx(t)
	b := c.Backend("be_live")
	a, other := dialFront(t, front), dialFront(t, front)
	sa, so := sessionOf(t, b, a), sessionOf(t, b, other)
	assert.Equal(t, "l1", sa.Server)
	assert.Equal(t, "fe_live", sa.Frontend)
	assert.NotEqual(t, sa.ID, so.ID)

	require.NoError(t, b.ShutdownStream(ctx, sa))
	require.NoError(t, a.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := a.Read(make([]byte, 1))
	require.Error(t, err)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "read timed out: the connection is still open")
	assertOpen(t, other)
	require.ErrorIs(t, b.ShutdownStream(ctx, sa), ErrNoSession, "a gone stream")
	testenv.WaitFor(t, "one stream left", func() bool {
		left, err := b.Sessions(ctx)
		return err == nil && len(left) == 1 && left[0].ID == so.ID
	})
	require.NoError(t, other.Close())
	testenv.WaitFor(t, "no stream left", func() bool {
		left, err := b.Sessions(ctx)
		return err == nil && len(left) == 0
	})
}

// checkVersionFastSignal: ReadLocal counts, to the byte, what an open
// connection sends, while it stays open.
func checkVersionFastSignal(t *testing.T, c *Client, front int) {
	c.SetLocalBudget(LocalBudget{Share: time.Nanosecond, PerStream: time.Nanosecond}) // every read dumps
	b := c.Backend("be_live")
	q := LocalQuery{Servers: []string{"l1"}}
	conn := dialFront(t, front)
	base := waitLocal(t, b, q, func(r StreamsReading) bool { return r.OpenAt["l1"] == 1 })
	write(t, conn, 12_345)
	r := waitLocal(t, b, q, func(r StreamsReading) bool { return r.Servers["l1"].Bytes-base.Servers["l1"].Bytes >= 12_345 })
	assert.Equal(t, float64(12_345), r.Servers["l1"].Bytes-base.Servers["l1"].Bytes)
	assert.Equal(t, 1, r.OpenAt["l1"], "counted while open")
	assert.NoError(t, r.Dead)
	write(t, conn, 1_000)
	r = waitLocal(t, b, q, func(r StreamsReading) bool { return r.Servers["l1"].Bytes-base.Servers["l1"].Bytes >= 13_345 })
	assert.Equal(t, float64(13_345), r.Servers["l1"].Bytes-base.Servers["l1"].Bytes)
}

// checkVersionMaster: through the master CLI (`haproxy -W -S`, no stats
// socket) weights are written and read back, errors named, the fast signal
// read; after a reload the same client reads and writes the new worker.
func checkVersionMaster(t *testing.T, version string) {
	front := testenv.FreePort(t)
	h := testenv.StartHAProxyMasterVersion(t, version, masterConfig(t, front))
	c, err := New(Config{Socket: h.Socket, Master: true, Timeout: duration.Duration(5 * time.Second)})
	require.NoError(t, err)
	ctx := testCtx(t)
	b := c.Backend("be_app")
	require.NoError(t, b.Check(ctx))
	require.NoError(t, b.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 9}, {Server: "s2", Weight: 3}}))
	got := byName(t, b)
	assert.Equal(t, 9, got["s1"].Weight)
	assert.Equal(t, 3, got["s2"].Weight)
	assert.Contains(t, h.Command(fmt.Sprintf("@!%d get weight be_app/s1", h.Worker())), "9 (initial 1)")
	_, err = c.Backend("nope").Servers(ctx)
	require.ErrorIs(t, err, ErrNoBackend)
	require.ErrorIs(t, b.SetWeights(ctx, []weighter.Change{{Server: "ghost", Weight: 5}}), ErrNoServer)
	require.ErrorIs(t, c.Backend("be_static").Check(ctx), ErrStaticWeights)

	c.SetLocalBudget(LocalBudget{Share: time.Nanosecond, PerStream: time.Nanosecond})
	live := c.Backend("be_live")
	q := LocalQuery{Servers: []string{"l1"}}
	conn := dialFront(t, front)
	base := waitLocal(t, live, q, func(r StreamsReading) bool { return r.OpenAt["l1"] == 1 })
	write(t, conn, 2_222)
	r := waitLocal(t, live, q, func(r StreamsReading) bool { return r.Servers["l1"].Bytes-base.Servers["l1"].Bytes >= 2_222 })
	assert.Equal(t, float64(2_222), r.Servers["l1"].Bytes-base.Servers["l1"].Bytes)
	require.NoError(t, conn.Close())

	pid := h.Reload()
	testenv.WaitFor(t, "the new worker's configured weights", func() bool {
		servers, err := b.Servers(ctx)
		return err == nil && len(servers) == 4 && servers[0].Name == "s1" && servers[0].Weight == 1
	})
	require.NoError(t, b.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 55}}))
	assert.Contains(t, h.Command(fmt.Sprintf("@!%d get weight be_app/s1", pid)), "55 (initial 1)", "written to the new worker")
}

package haproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/errs"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// pinConfig is a frontend fe_pin on front in front of be_pin (roundrobin,
// s1, s2 and s3 with id 7, a `type ip` pin table), and the other pin
// tables' backends: be_pin6 (`type ipv6`), be_full (room for 2 entries),
// be_track (an ip table that stores no server_id: HAProxy refuses pins),
// be_str (a string table), be_none (no table), be_big (a big table).
func pinConfig(t testing.TB, front int) string {
	srv := func() string { return testenv.StartDiscardServer(t) }
	return testenv.HAProxyDefaults + fmt.Sprintf(`
frontend fe_pin
  bind 127.0.0.1:%d
  default_backend be_pin
backend be_pin
  balance roundrobin
  stick-table type ip size 100 expire 2h
  stick match src
  server s1 %s
  server s2 %s
  server s3 %s id 7
backend be_pin6
  stick-table type ipv6 size 10 expire 2h
  stick match src
  server a %s
backend be_full
  stick-table type ip size 2 expire 2h
  stick match src
  server f1 %s
  server f2 %s
backend be_track
  stick-table type ip size 10 expire 2h store conn_cur
  tcp-request content track-sc0 src
  server t1 %s
backend be_str
  stick-table type string size 10 expire 2h
  stick match req.payload(0,1)
  server x %s
backend be_none
  server n1 %s
backend be_big
  stick-table type ip size 200k expire 2h
  stick match src
  server s1 %s
`, front, srv(), srv(), srv(), srv(), srv(), srv(), srv(), srv(), srv(), srv())
}

// TestPinsVersions: the pin table over the runtime API of every HAProxy a
// Debian user has (testenv.HAProxyVersions): pins written in the weights'
// batch and read back, followed by HAProxy for new connections, withdrawn in
// the batch that drains their server, and the refusals (no table, a table of
// another type, a bad client, a command HAProxy refuses, a full table).
func TestPinsVersions(t *testing.T) {
	for _, version := range testenv.HAProxyVersions() {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			front := testenv.FreePort(t)
			h := testenv.StartHAProxyVersion(t, version, pinConfig(t, front))
			c := newClient(t, h.Socket)
			t.Run("written, read back and followed", func(t *testing.T) { checkPinsFollowed(t, c, front) })
			t.Run("pin to a server in maintenance", func(t *testing.T) { checkPinsMaint(t, c, front) })
			t.Run("ipv6 table", func(t *testing.T) { checkPinsIPv6(t, c) })
			t.Run("refused", func(t *testing.T) { checkPinsRefused(t, c) })
			t.Run("full table", func(t *testing.T) { checkPinsFull(t, c) })
			t.Run("master CLI", func(t *testing.T) { checkPinsMaster(t, version) })
		})
	}
}

// checkPinsFollowed: two pins and a weight in one batch, read back with
// their servers' names; connections from the pinned addresses land on their
// servers, an unpinned one is balanced; a pin withdrawn in the batch that
// drains its server (weight 0) no longer sends the client there.
func checkPinsFollowed(t *testing.T, c *Client, front int) {
	ctx := testCtx(t)
	b := c.Backend("be_pin")
	table, err := b.Pins(ctx)
	require.NoError(t, err)
	assert.Equal(t, weighter.PinTable{Name: "be_pin", Size: 100, Pins: []weighter.Pin{}}, table)

	require.NoError(t, b.SetWeightsAndPins(ctx, []weighter.Change{{Server: "s1", Weight: 2}},
		weighter.PinChanges{Set: []weighter.Pin{{Client: "127.0.0.5", Server: "s3"}, {Client: "127.0.0.6", Server: "s1"}}}))
	assert.Equal(t, 2, byName(t, b)["s1"].Weight)
	table, err = b.Pins(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1+1, table.Used)
	assert.ElementsMatch(t, []weighter.Pin{{Client: "127.0.0.5", Server: "s3"}, {Client: "127.0.0.6", Server: "s1"}}, table.Pins)
	assert.Empty(t, table.Stray)
	assert.Contains(t, raw(t, c, "show table be_pin"), "key=127.0.0.5 ", "s3's id 7, not its position")

	for range 3 {
		assert.Equal(t, "s3", landsOn(t, c, "be_pin", front, "127.0.0.5"))
		assert.Equal(t, "s1", landsOn(t, c, "be_pin", front, "127.0.0.6"))
	}
	unpinned := map[string]bool{}
	for range 4 {
		unpinned[landsOn(t, c, "be_pin", front, "127.0.0.7")] = true
	}
	assert.Greater(t, len(unpinned), 1, "an unpinned client is balanced: %v", unpinned)

	// A pin beats weight 0: withdrawn in the same batch, before the drain.
	require.NoError(t, b.SetWeightsAndPins(ctx, []weighter.Change{{Server: "s3", Weight: 0}},
		weighter.PinChanges{Clear: []string{"127.0.0.5"}}))
	assert.Equal(t, 0, byName(t, b)["s3"].Weight)
	table, err = b.Pins(ctx)
	require.NoError(t, err)
	assert.Equal(t, []weighter.Pin{{Client: "127.0.0.6", Server: "s1"}}, table.Pins)
	for range 4 {
		assert.NotEqual(t, "s3", landsOn(t, c, "be_pin", front, "127.0.0.5"), "the drained server")
	}

	// An entry naming no server (written by hand) is stray.
	raw(t, c, "set table be_pin key 127.0.0.9 data.server_id 99")
	table, err = b.Pins(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.9"}, table.Stray)
	assert.Equal(t, []weighter.Pin{{Client: "127.0.0.6", Server: "s1"}}, table.Pins)
}

// checkPinsMaint: a pin to a server in MAINT is not followed (the client is
// balanced over the others, without `option redispatch`), and the entry
// stays: once the server is enabled again, the client goes there again.
func checkPinsMaint(t *testing.T, c *Client, front int) {
	ctx := testCtx(t)
	b := c.Backend("be_pin")
	require.NoError(t, b.SetWeightsAndPins(ctx, nil, weighter.PinChanges{Set: []weighter.Pin{{Client: "127.0.0.11", Server: "s2"}}}))
	assert.Equal(t, "s2", landsOn(t, c, "be_pin", front, "127.0.0.11"))
	raw(t, c, "disable server be_pin/s2")
	for range 3 {
		assert.NotEqual(t, "s2", landsOn(t, c, "be_pin", front, "127.0.0.11"), "s2 is in maintenance")
	}
	table, err := b.Pins(ctx)
	require.NoError(t, err)
	assert.Contains(t, table.Pins, weighter.Pin{Client: "127.0.0.11", Server: "s2"}, "the entry stays")
	raw(t, c, "enable server be_pin/s2")
	assert.Equal(t, "s2", landsOn(t, c, "be_pin", front, "127.0.0.11"))
	require.NoError(t, b.SetWeightsAndPins(ctx, nil, weighter.PinChanges{Clear: []string{"127.0.0.11"}}))
}

// checkPinsIPv6: an IPv4 client is written to a `type ipv6` table as
// ::ffff:a.b.c.d (2.6 refuses the plain form) and read back as IPv4; an
// IPv6 client as itself.
func checkPinsIPv6(t *testing.T, c *Client) {
	ctx := testCtx(t)
	b := c.Backend("be_pin6")
	require.NoError(t, b.SetWeightsAndPins(ctx, nil, weighter.PinChanges{Set: []weighter.Pin{
		{Client: "127.0.0.5", Server: "a"}, {Client: "2001:db8::1", Server: "a"}}}))
	assert.Contains(t, raw(t, c, "show table be_pin6"), "key=::ffff:127.0.0.5 ")
	table, err := b.Pins(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []weighter.Pin{{Client: "127.0.0.5", Server: "a"}, {Client: "2001:db8::1", Server: "a"}}, table.Pins)
	require.NoError(t, b.SetWeightsAndPins(ctx, nil, weighter.PinChanges{Clear: []string{"127.0.0.5", "::ffff:127.0.0.6"}}))
	table, err = b.Pins(ctx)
	require.NoError(t, err)
	assert.Equal(t, []weighter.Pin{{Client: "2001:db8::1", Server: "a"}}, table.Pins)
}

// checkPinsRefused: a backend without a pin table gets its weights and
// ErrNoPinTable; a string table is no pin table either; a client that is not
// an address, or IPv6 for a `type ip` table, is never sent; a pin HAProxy
// refuses is a PinError for that client, and the weights are written.
func checkPinsRefused(t *testing.T, c *Client) {
	ctx := testCtx(t)
	_, err := c.Backend("be_none").Pins(ctx)
	require.ErrorIs(t, err, weighter.ErrNoPinTable)
	assert.Contains(t, err.Error(), "has no stick table")
	_, err = c.Backend("be_str").Pins(ctx)
	require.ErrorIs(t, err, weighter.ErrNoPinTable)
	assert.Contains(t, err.Error(), "type string")
	_, err = c.Backend("nope").Pins(ctx)
	require.ErrorIs(t, err, ErrNoBackend)

	none := c.Backend("be_none")
	err = none.SetWeightsAndPins(ctx, []weighter.Change{{Server: "n1", Weight: 3}},
		weighter.PinChanges{Set: []weighter.Pin{{Client: "127.0.0.5", Server: "n1"}}})
	require.ErrorIs(t, err, weighter.ErrNoPinTable)
	assert.Equal(t, 3, byName(t, none)["n1"].Weight, "the weights are written without the pins")

	var mu sync.Mutex
	var sentCmds []string
	c.trace = func(cmds []string) { mu.Lock(); sentCmds = append(sentCmds, cmds...); mu.Unlock() }
	defer func() { c.trace = nil }()
	b := c.Backend("be_pin")
	err = b.SetWeightsAndPins(ctx, []weighter.Change{{Server: "s2", Weight: 4}}, weighter.PinChanges{
		Clear: []string{"10.0.0.1;show info"},
		Set: []weighter.Pin{{Client: "not-an-ip", Server: "s1"}, {Client: "2001:db8::5", Server: "s1"},
			{Client: "1.2.3", Server: "s1"}, {Client: "127.0.0.8", Server: "ghost"}, {Client: "127.0.0.10", Server: "s2"}}})
	assert.Equal(t, []string{"10.0.0.1;show info", "not-an-ip", "2001:db8::5", "1.2.3", "127.0.0.8"}, pinErrorClients(err))
	assert.ErrorIs(t, err, ErrNoServer)
	mu.Lock()
	for _, cmd := range sentCmds {
		for _, bad := range []string{"show info", "not-an-ip", "2001:db8::5", "1.2.3 ", "127.0.0.8"} {
			assert.NotContains(t, cmd, bad, "refused before sending")
		}
	}
	mu.Unlock()
	assert.Equal(t, 4, byName(t, b)["s2"].Weight)
	table, err := b.Pins(ctx)
	require.NoError(t, err)
	assert.Contains(t, table.Pins, weighter.Pin{Client: "127.0.0.10", Server: "s2"}, "the good pin of the batch is written")

	// be_track's table stores no server_id: HAProxy refuses the pin.
	track := c.Backend("be_track")
	err = track.SetWeightsAndPins(ctx, []weighter.Change{{Server: "t1", Weight: 9}},
		weighter.PinChanges{Set: []weighter.Pin{{Client: "127.0.0.5", Server: "t1"}}})
	assert.Equal(t, []string{"127.0.0.5"}, pinErrorClients(err))
	assert.Contains(t, err.Error(), "Data type not stored")
	var se *weighter.ServerError
	assert.False(t, errors.As(err, &se), "the weight is not blamed: %v", err)
	assert.Equal(t, 9, byName(t, track)["t1"].Weight)
}

// checkPinsFull: a third pin in a table of size 2 is taken without a word
// from HAProxy, which evicts entries to make room; the batch says
// ErrPinTableFull.
func checkPinsFull(t *testing.T, c *Client) {
	ctx := testCtx(t)
	b := c.Backend("be_full")
	require.NoError(t, b.SetWeightsAndPins(ctx, nil, weighter.PinChanges{Set: []weighter.Pin{
		{Client: "127.0.0.1", Server: "f1"}, {Client: "127.0.0.2", Server: "f2"}}}))
	table, err := b.Pins(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, table.Used)
	assert.Equal(t, table.Size, table.Used)

	err = b.SetWeightsAndPins(ctx, nil, weighter.PinChanges{Set: []weighter.Pin{{Client: "127.0.0.3", Server: "f1"}}})
	require.ErrorIs(t, err, weighter.ErrPinTableFull)
	assert.Empty(t, pinErrorClients(err), "HAProxy refused nothing")
	table, err = b.Pins(ctx)
	require.NoError(t, err)
	assert.Contains(t, table.Pins, weighter.Pin{Client: "127.0.0.3", Server: "f1"}, "the new pin is in")
	assert.Less(t, len(table.Pins), 3, "an older pin was evicted: %v", table.Pins)
	t.Logf("HAProxy %s, full table given a third pin: %d of %d used, %v", c.cfg.Socket, table.Used, table.Size, table.Pins)
}

// checkPinsMaster: through the master CLI (`haproxy -W -S`), pins are
// written in the weights' batch and read back, and a pin the worker refuses
// is that client's PinError with HAProxy's words, as on a worker's socket.
func checkPinsMaster(t *testing.T, version string) {
	h := testenv.StartHAProxyMasterVersion(t, version, pinConfig(t, testenv.FreePort(t)))
	c, err := New(Config{Socket: h.Socket, Master: true, Timeout: duration.Duration(5 * time.Second)})
	require.NoError(t, err)
	ctx := testCtx(t)
	b := c.Backend("be_pin")
	require.NoError(t, b.SetWeightsAndPins(ctx, []weighter.Change{{Server: "s2", Weight: 3}},
		weighter.PinChanges{Set: []weighter.Pin{{Client: "127.0.0.5", Server: "s3"}}}))
	table, err := b.Pins(ctx)
	require.NoError(t, err)
	assert.Equal(t, weighter.PinTable{Name: "be_pin", Size: 100, Used: 1, Pins: []weighter.Pin{{Client: "127.0.0.5", Server: "s3"}}}, table)
	assert.Equal(t, 3, byName(t, b)["s2"].Weight)

	err = c.Backend("be_track").SetWeightsAndPins(ctx, nil, weighter.PinChanges{Set: []weighter.Pin{{Client: "127.0.0.5", Server: "t1"}}})
	assert.Equal(t, []string{"127.0.0.5"}, pinErrorClients(err))
	assert.Contains(t, err.Error(), "Data type not stored")
	assert.NotErrorIs(t, err, ErrBadReply)
	_, err = c.Backend("be_none").Pins(ctx)
	require.ErrorIs(t, err, weighter.ErrNoPinTable)
}

// landsOn opens a connection from src (127.0.0.N) through the frontend at
// front and returns the server of backend whose `show stat` stot counted it.
func landsOn(t *testing.T, c *Client, backend string, front int, src string) string {
	t.Helper()
	before := stot(t, c, backend)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", front))
	require.NoError(t, err)
	_, err = conn.Write([]byte("x"))
	require.NoError(t, err)
	var got string
	testenv.WaitFor(t, "the connection from "+src+" counted on a server", func() bool {
		after := stot(t, c, backend)
		for name, n := range after {
			if n > before[name] {
				got = name
				return true
			}
		}
		return false
	})
	require.NoError(t, conn.Close())
	return got
}

// stot is each server's total sessions.
func stot(t *testing.T, c *Client, backend string) map[string]uint64 {
	t.Helper()
	stats, err := c.Stats(testCtx(t), backend)
	require.NoError(t, err)
	m := make(map[string]uint64, len(stats))
	for _, s := range stats {
		m[s.Server] = uint64(s.SessionsTotal)
	}
	return m
}

// pinErrorClients lists the clients of the PinErrors err joins, in order.
func pinErrorClients(err error) []string {
	var clients []string
	for _, e := range errs.Leaves(err) {
		var pe *weighter.PinError
		if errors.As(e, &pe) {
			clients = append(clients, pe.Client)
		}
	}
	return clients
}

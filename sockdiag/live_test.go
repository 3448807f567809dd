package sockdiag

import (
	"math"
	"net/netip"
	"os/user"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

const replyBytes = 300

// TestLiveCountsOnlyHAProxysConnections sends known bytes through a real
// HAProxy 2.6 to one server, while another connection of this process goes
// straight to the server's address with a megabyte: the reading counts
// HAProxy's bytes to the byte, both directions, and leaves the other
// connection out, by inode (HAProxy and the test both root, so the uid could
// not tell them apart), by uid (HAProxy as nobody), and over IPv6. With
// ownership "any" the other connection counts: the check can fail.
func TestLiveCountsOnlyHAProxysConnections(t *testing.T) {
	for _, tc := range []struct {
		name, host, global string
		force, want        Ownership
	}{
		{name: "inode", host: "127.0.0.1", want: OwnerInode},
		{name: "uid", host: "127.0.0.1", global: "  user nobody\n  group nogroup", force: OwnerUID, want: OwnerUID},
		{name: "ipv6 inode", host: "::1", want: OwnerInode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startReplyServer(t, tc.host, replyBytes)
			servers := map[string]netip.AddrPort{"s1": srv}
			h, fe := startHAProxy(t, tc.global, servers)
			r := New(Config{PIDs: pidOf(h), Ownership: tc.force})
			any := New(Config{Ownership: OwnerAny})

			first := waitRead(t, r, servers, func(TableReading) bool { return true })
			require.Equal(t, tc.want, first.Owner, first.OwnerWhy)
			if tc.want == OwnerUID {
				nobody, err := user.Lookup("nobody")
				require.NoError(t, err)
				assert.Equal(t, []uint32{uidOf(t, nobody)}, first.UIDs, "whose uid tells HAProxy's sockets")
			} else {
				assert.Empty(t, first.UIDs)
			}
			require.True(t, first.Servers["s1"].Reset)
			_, err := any.Read(testenv.Context(t, 10*time.Second), servers)
			require.NoError(t, err)

			other := dial(t, srv.String(), 1<<20) // not HAProxy's
			c1 := dial(t, fe, 1000)
			dial(t, fe, 2500)
			got := waitRead(t, r, servers, func(g TableReading) bool {
				s := g.Servers["s1"]
				return s.In == 3500 && s.Out == 2*replyBytes && s.Open == 2 && g.Foreign >= 1
			})
			assert.Equal(t, srv, got.Servers["s1"].Addr)
			require.Len(t, got.Conns, 2)
			for _, c := range got.Conns {
				assert.Equal(t, "s1", c.Server)
				assert.Equal(t, srv, c.Remote)
				assert.NotEqual(t, other.LocalAddr().String(), c.Local.String(), "the other process's connection is listed")
				assert.NotZero(t, c.Inode)
			}

			// The same sockets read by any: the direct connection counts too.
			withOther := waitRead(t, any, servers, func(g TableReading) bool { return g.Servers["s1"].In >= 1<<20 })
			assert.Equal(t, 3, withOther.Servers["s1"].Open)
			assert.Zero(t, withOther.Foreign)

			// One connection moves, the other does not: their own rates say so.
			_, err = c1.Write(make([]byte, 500))
			require.NoError(t, err)
			got = waitRead(t, r, servers, func(g TableReading) bool { return g.Servers["s1"].In == 4000 })
			if got.Since.After(first.At) && !got.Servers["s1"].Reset {
				assert.Positive(t, got.Servers["s1"].RateIn)
			}
		})
	}
}

// TestLiveClosedAndNewConnections: a connection that closes keeps what was
// counted of it; one opened between two reads counts all its bytes, those
// it carried before the read that first saw it included.
func TestLiveClosedAndNewConnections(t *testing.T) {
	srv := startReplyServer(t, "127.0.0.1", replyBytes)
	servers := map[string]netip.AddrPort{"s1": srv}
	h, fe := startHAProxy(t, "", servers)
	r := New(Config{PIDs: pidOf(h)})

	c1 := dial(t, fe, 1000)
	waitRead(t, r, servers, func(g TableReading) bool { return g.Servers["s1"].Open == 1 })
	got := waitRead(t, r, servers, func(g TableReading) bool {
		return connIn(g) == 1000 && len(g.Conns) == 1 && g.Conns[0].Out == replyBytes
	})
	base := got.Servers["s1"]
	// Read before the bytes reached the server or not, the first sight was
	// the base: the counter holds what came after it.
	require.LessOrEqual(t, base.In, uint64(1000))
	require.LessOrEqual(t, base.Out, uint64(replyBytes))

	require.NoError(t, c1.Close())
	got = waitRead(t, r, servers, func(g TableReading) bool { return g.Servers["s1"].Open == 0 })
	assert.Equal(t, base.In, got.Servers["s1"].In, "a closed connection keeps its bytes, adds none")
	assert.Equal(t, base.Out, got.Servers["s1"].Out)

	// A new connection carries 700 bytes while r does not read; another
	// Reader sees them arrive. r's next read counts all 700.
	dial(t, fe, 700)
	watcher := New(Config{PIDs: pidOf(h)})
	waitRead(t, watcher, servers, func(g TableReading) bool { return connIn(g) == 700 })
	got = waitRead(t, r, servers, func(TableReading) bool { return true })
	s := got.Servers["s1"]
	assert.Equal(t, base.In+700, s.In, "the new connection's bytes before its first sight")
	assert.Equal(t, base.Out+replyBytes, s.Out)
	assert.Equal(t, 1, s.Open)
	require.Len(t, got.Conns, 1)
	assert.True(t, isNaN(got.Conns[0].RateIn), "a connection the read before did not see has no rate")
}

// connIn sums the open connections' own In totals.
func connIn(g TableReading) uint64 {
	var n uint64
	for _, c := range g.Conns {
		n += c.In
	}
	return n
}

func isNaN(f float64) bool { return math.IsNaN(f) }

// uidOf is u's uid.
func uidOf(t *testing.T, u *user.User) uint32 {
	t.Helper()
	v, err := strconv.ParseUint(u.Uid, 10, 32)
	require.NoError(t, err)
	return uint32(v)
}

// TestLiveNewConnectionCountsAtTheMean: on a real HAProxy 2.6, a server
// carries one connection writing steadily; a second one opens just before a
// read, having carried a byte. That read's load per connection of the
// server, as the weighter makes it (CombineFast over the LocalReader), is
// the first connection's rate, not pulled down by the new one as if it were
// idle (it counted ½ session with its byte: the load fell by a third, and
// the server, idler on paper, was raised: 32 → 66). The reading's rate and
// sessions stay the server's totals. The next read has the new
// connection's rate, and it counts.
func TestLiveNewConnectionCountsAtTheMean(t *testing.T) {
	srv := startReplyServer(t, "127.0.0.1", replyBytes)
	servers := map[string]netip.AddrPort{"s1": srv}
	h, fe := startHAProxy(t, "", servers)
	l := NewLocalReader(New(Config{PIDs: pidOf(h)}), func([]weighter.ServerState) (map[string]netip.AddrPort, error) {
		return servers, nil
	}, weighter.BytesIn)
	read := func() (weighter.LocalRead, TableReading) {
		t.Helper()
		got, err := l.ReadLocal(testenv.Context(t, 10*time.Second), []weighter.ServerState{{Name: "s1"}})
		require.NoError(t, err)
		return got, l.Last()
	}
	steady := dial(t, fe, 0)
	testenv.WriteEvery(t, steady, 2000, 10*time.Millisecond)
	testenv.WaitWithin(t, 10*time.Second, "the steady connection's rate", func() bool {
		got, last := read()
		return len(last.Conns) == 1 && last.Conns[0].RateIn > 0 && !got.Servers["s1"].Reset
	})
	dial(t, fe, 1)
	time.Sleep(50 * time.Millisecond) // a span in which the steady connection writes
	var got weighter.LocalRead
	var last TableReading
	testenv.WaitWithin(t, 10*time.Second, "the new connection in a read", func() bool {
		got, last = read()
		return last.Servers["s1"].Open == 2
	})
	s := last.Servers["s1"]
	require.Equal(t, 1, s.Fresh, "the new connection has no rate yet")
	var old Conn
	for _, c := range last.Conns {
		if !isNaN(c.RateIn) {
			old = c
		}
	}
	require.Positive(t, old.RateIn)
	assert.InDelta(t, 1.5, s.Sessions, 1e-9, "the reading's sessions: both connections")
	loads, in := weighter.CombineFast(got, nil)
	require.Contains(t, loads, "s1")
	assert.InDelta(t, old.RateIn, loads["s1"][0].Value, 1e-6*old.RateIn, "load per connection: the rated connection's")
	assert.InDelta(t, 0.5, in["s1"].Fresh, 1e-9, "the new connection's half session, left out")

	// The read after: both have a rate, both count.
	time.Sleep(50 * time.Millisecond)
	got, last = read()
	assert.Zero(t, last.Servers["s1"].Fresh)
	assert.InDelta(t, 2, last.Servers["s1"].Sessions, 1e-9)
	_, in = weighter.CombineFast(got, nil)
	assert.InDelta(t, 2, in["s1"].Sessions, 1e-9)
	assert.Zero(t, in["s1"].Fresh)
}

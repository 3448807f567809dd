package sockdiag

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestLocalReaderServesTheWeighter reads a real HAProxy's connections
// through the weighter's interface: each named server has an entry (one
// without an address too, unread: never an idle 0), the direction asked
// for, a first read that is Reset, then rates.
func TestLocalReaderServesTheWeighter(t *testing.T) {
	srv := startReplyServer(t, "127.0.0.1", replyBytes)
	h, fe := startHAProxy(t, "", map[string]netip.AddrPort{"s1": srv})
	addrs := func([]weighter.ServerState) (map[string]netip.AddrPort, error) {
		return map[string]netip.AddrPort{"s1": srv, "s2": {}}, nil
	}
	in := NewLocalReader(New(Config{PIDs: pidOf(h)}), addrs, weighter.BytesIn)
	out := NewLocalReader(New(Config{PIDs: pidOf(h)}), addrs, weighter.BytesOut)
	for _, l := range []*LocalReader{in, out} {
		first, err := l.ReadLocal(testenv.Context(t, 10*time.Second), []weighter.ServerState{{Name: "s1"}, {Name: "s2"}})
		require.NoError(t, err)
		require.Len(t, first.Servers, 2)
		assert.True(t, first.Servers["s1"].Reset)
		assert.True(t, first.Servers["s2"].Reset)
		assert.Zero(t, first.Streams, "the read costs HAProxy nothing")
	}

	dial(t, fe, 4000)
	for _, tc := range []struct {
		l    *LocalReader
		want float64
	}{{in, 4000}, {out, replyBytes}} {
		var got weighter.LocalRead
		deadline := time.Now().Add(15 * time.Second)
		for got.Servers["s1"].Bytes != tc.want {
			var err error
			got, err = tc.l.ReadLocal(testenv.Context(t, 10*time.Second), []weighter.ServerState{{Name: "s1"}, {Name: "s2"}})
			require.NoError(t, err)
			require.LessOrEqual(t, got.Servers["s1"].Bytes, tc.want)
			require.False(t, time.Now().After(deadline), "never read %v bytes: %+v", tc.want, got)
			time.Sleep(5 * time.Millisecond)
		}
		assert.False(t, got.Servers["s1"].Reset)
		assert.Equal(t, weighter.LocalCounter{Unread: unreadNoAddress}, got.Servers["s2"])
		assert.Len(t, tc.l.Last().Conns, 1)
	}

	// Not one server with an address: the table says nothing of the
	// backend, and the reader says so rather than read every server 0.
	none := NewLocalReader(New(Config{PIDs: pidOf(h)}), func([]weighter.ServerState) (map[string]netip.AddrPort, error) {
		return map[string]netip.AddrPort{"s2": {}}, nil
	}, weighter.BytesIn)
	_, err := none.ReadLocal(testenv.Context(t, 10*time.Second), []weighter.ServerState{{Name: "s2"}, {Name: "s3"}})
	require.ErrorIs(t, err, ErrNoAddress)
	got, err := none.ReadLocal(testenv.Context(t, 10*time.Second), nil)
	require.NoError(t, err, "a backend without servers is no error")
	assert.Empty(t, got.Servers)

	broken := NewLocalReader(New(Config{}), func([]weighter.ServerState) (map[string]netip.AddrPort, error) {
		return nil, errors.New("socket gone")
	}, weighter.BytesIn)
	_, err = broken.ReadLocal(testenv.Context(t, 10*time.Second), []weighter.ServerState{{Name: "s1"}})
	require.ErrorContains(t, err, "socket gone")
}

// TestLocalReaderUnattributedSessionsAreUnread: a server whose sessions
// HAProxy reports (scur) and whose connections the table does not show is
// unread, not idle. On a real HAProxy 2.6 the server's address changes
// (`set server … addr`, as DNS does) while a connection to its old address
// lives: `show servers state` has the new address, the table the connection
// to the old one, which is no longer the server's. The reading said 0 B/s;
// it is unread until a connection to the new address carries bytes.
func TestLocalReaderUnattributedSessionsAreUnread(t *testing.T) {
	a := startReplyServer(t, "127.0.0.1", replyBytes)
	b := startReplyServer(t, "127.0.0.1", replyBytes)
	h, fe := startHAProxy(t, "", map[string]netip.AddrPort{"s1": a})
	c, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	hb := c.Backend("be")
	l := NewLocalReader(New(Config{PIDs: pidOf(h)}), func(s []weighter.ServerState) (map[string]netip.AddrPort, error) {
		return haproxy.ServerAddrs(s), nil
	}, weighter.BytesIn)
	read := func() (weighter.LocalCounter, []weighter.ServerState) {
		t.Helper()
		ctx := testenv.Context(t, 10*time.Second)
		servers, err := hb.Servers(ctx)
		require.NoError(t, err)
		got, err := l.ReadLocal(ctx, servers)
		require.NoError(t, err)
		return got.Servers["s1"], servers
	}

	dial(t, fe, 1000)
	testenv.WaitWithin(t, 10*time.Second, "s1's connection read", func() bool {
		s, _ := read()
		return !s.Reset && s.Sessions == 1 && s.Unread == ""
	})
	testenv.Command(t, h.Socket, fmt.Sprintf("set server be/s1 addr %s port %d", b.Addr(), b.Port()))
	for range 3 {
		s, servers := read()
		require.Equal(t, b.String(), servers[0].Address, "show servers state has the new address")
		require.Equal(t, 1, servers[0].Sessions, "HAProxy's session on the old address lives")
		assert.Contains(t, s.Unread, "HAProxy reports 1 sessions on it and the socket table showed none of its connections")
		assert.Zero(t, s.Rate)
	}

	dial(t, fe, 2000) // to the new address
	testenv.WaitWithin(t, 10*time.Second, "s1 read again", func() bool {
		s, _ := read()
		return s.Unread == "" && !s.Reset && s.Rate > 0
	})
}

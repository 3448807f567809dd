package sockdiag

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

	broken := NewLocalReader(New(Config{}), func([]weighter.ServerState) (map[string]netip.AddrPort, error) {
		return nil, errors.New("socket gone")
	}, weighter.BytesIn)
	_, err := broken.ReadLocal(testenv.Context(t, 10*time.Second), []weighter.ServerState{{Name: "s1"}})
	require.ErrorContains(t, err, "socket gone")
}

package fastsignal

import (
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestKernelReaderListsTheClients: the chain built with the backend's
// listeners fills LocalRead.Clients from the socket table on each read, on
// a real HAProxy 2.6: each client address of the backend's frontend with
// its connections, no rate at the read that first sees them (NaN), then
// heaviest first; a client of a frontend routing to another backend is not
// listed. Built without listeners (NewHAProxyChain), the same reads list no
// client (nil) and make no client dump.
func TestKernelReaderListsTheClients(t *testing.T) {
	sink, other := testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)
	fePort, otherPort := testenv.FreePort(t), testenv.FreePort(t)
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`frontend fe
  bind :%d
  default_backend be
frontend fe2
  bind 127.0.0.1:%d
  default_backend be2
backend be
  server s1 %s
backend be2
  server s2 %s
`, fePort, otherPort, sink, other))
	hc, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	hb := hc.Backend("be")
	log := slog.New(slog.DiscardHandler)
	chain := NewHAProxyChainWith(hb, hc, false, weighter.BytesIn, log,
		ChainOptions{Listeners: []netip.AddrPort{netip.MustParseAddrPort(fmt.Sprintf("0.0.0.0:%d", fePort))}})
	plain := NewHAProxyChain(hb, hc, false, weighter.BytesIn, log)

	fe := fmt.Sprintf("127.0.0.1:%d", fePort)
	heavy := testenv.DialFrom(t, "127.0.0.2", fe, 1)
	testenv.DialFrom(t, "127.0.0.3", fe, 1)
	testenv.DialFrom(t, "127.0.0.3", fe, 1)
	testenv.DialFrom(t, "127.0.0.9", fmt.Sprintf("127.0.0.1:%d", otherPort), 1)
	read := func(c *Chain) weighter.LocalRead {
		ctx := testenv.Context(t, 10*time.Second)
		servers, err := hb.Servers(ctx)
		require.NoError(t, err)
		got, err := c.ReadLocal(ctx, servers)
		require.NoError(t, err)
		require.Equal(t, ReaderKernel, got.Reader)
		return got
	}
	var first weighter.LocalRead
	testenv.WaitFor(t, "the three clients listed", func() bool {
		first = read(chain)
		return chain.Clients().Open == 3
	})
	require.Len(t, first.Clients, 2, "fe2's client is not be's")
	conns := map[string]int{}
	for _, c := range first.Clients {
		conns[c.Addr] = c.Conns
	}
	assert.Equal(t, map[string]int{"127.0.0.2": 1, "127.0.0.3": 2}, conns)
	assert.Equal(t, ClientCounts{Read: true, Open: 3, Tracked: 2}, chain.Clients())

	// .2 sends; the next read has its rate, and it comes first.
	_, err = heavy.Write(make([]byte, 50_000))
	require.NoError(t, err)
	var got weighter.LocalRead
	testenv.WaitFor(t, ".2's rate", func() bool {
		got = read(chain)
		return len(got.Clients) == 2 && got.Clients[0].Rate > 0
	})
	assert.Equal(t, "127.0.0.2", got.Clients[0].Addr)
	assert.Equal(t, 1, got.Clients[0].Conns)
	assert.Equal(t, "127.0.0.3", got.Clients[1].Addr)
	assert.False(t, math.IsNaN(got.Clients[1].Rate), "its connections were seen at the read before")

	without := read(plain)
	assert.Nil(t, without.Clients)
	assert.Nil(t, plain.kernel.local.Last().Clients, "no client dump")
	assert.Equal(t, ClientCounts{}, plain.Clients())
}

package peers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The peered reader over a real HAProxy adds exactly what the peer serves
// over HTTP: per server, its rate and sessions to the reader's own, its rate
// over the reader's own span to the byte counter.
func TestPeeredReaderAddsWhatThePeerServes(t *testing.T) {
	hs := testenv.StartTwoBalancers(t, [2]int{1000, 4000})
	var sets [2]*Set
	var readers [2]*Reader
	var own [2]*recordingReader
	var urls [2]string
	var servers [2][]weighter.ServerState // each balancer's, as its cycle reads them: matched by address
	for i, h := range hs {
		client, err := haproxy.New(haproxy.Config{Socket: h.Socket})
		require.NoError(t, err)
		servers[i], err = client.Backend("be").Servers(testenv.Context(t, 10*time.Second))
		require.NoError(t, err)
		sets[i] = newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
		srv := httptest.NewServer(sets[i])
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
		own[i] = &recordingReader{inner: haproxyReader{client.Backend("be")}}
		readers[i] = NewReader(own[i], "be", sets[i])
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); sets[0].Stop(); sets[1].Stop() })
	sets[0].Poll(ctx, []string{urls[1]}, 2*time.Second)

	names := []string{"s1", "s2"}
	for i, r := range readers { // until each has a rate (dumps are at least 1 s apart)
		testenv.WaitFor(t, fmt.Sprintf("a rate on balancer %d", i), func() bool {
			_, err := r.ReadLocal(ctx, servers[i])
			require.NoError(t, err)
			time.Sleep(100 * time.Millisecond)
			return !own[i].last.Since.IsZero()
		})
	}
	// The poller has B's newest reading once B's own answer says so.
	var served answer
	testenv.WaitFor(t, "the poller to fetch B's newest reading", func() bool {
		a, err := sets[0].ask(ctx, sets[0].peers[urls[1]], time.Second)
		if err != nil {
			return false
		}
		got, _ := sets[0].readings("be", false)
		if len(got) != 1 {
			return false
		}
		served = *a
		for _, s := range names {
			if got[0].servers[s] != a.Backends["be"].Servers[s] {
				return false
			}
		}
		return true
	})
	before, err := readers[0].ReadLocal(ctx, servers[0])
	require.NoError(t, err)
	ownBefore := own[0].last
	testenv.WaitFor(t, "A's next dump", func() bool {
		time.Sleep(100 * time.Millisecond)
		got, err := own[0].inner.ReadLocal(ctx, servers[0])
		require.NoError(t, err)
		return got.At.After(ownBefore.At)
	})
	got, err := readers[0].ReadLocal(ctx, servers[0])
	require.NoError(t, err)
	mine := own[0].last
	assert.Equal(t, "peers 1 of 1 added", got.Peers)
	span := got.At.Sub(got.Since).Seconds()
	for _, s := range names {
		p := served.Backends["be"].Servers[s]
		require.Greater(t, p.BytesPerSecond, 0.0, "B's clients upload to %s", s)
		c := got.Servers[s]
		assert.InDelta(t, mine.Servers[s].Rate+p.BytesPerSecond, c.Rate, 1e-6, s)
		assert.InDelta(t, mine.Servers[s].Sessions+p.Sessions, c.Sessions, 1e-9, s)
		// The counter grows by the own bytes and the peer's rate over the span.
		assert.InDelta(t, mine.Servers[s].Bytes-ownBefore.Servers[s].Bytes+p.BytesPerSecond*span,
			c.Bytes-before.Servers[s].Bytes, 1e-3, s)
	}
}

// recordingReader is a LocalReader that keeps what the reader it wraps returned.
type recordingReader struct {
	inner weighter.LocalReader
	last  weighter.LocalRead
}

func (r *recordingReader) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	got, err := r.inner.ReadLocal(ctx, servers)
	r.last = got
	return got, err
}

// A backend whose own fast read fails adds no peer's reading (it weighs by
// its source alone): peers_added says 0, not the count of its last good
// read.
func TestPeersAddedIsZeroWhenTheOwnReadFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	set := newSet(reg, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	set.Poll(ctx, []string{testenv.ServePeer(t, "10")}, 400*time.Millisecond)
	own := &failingAfter{}
	r := NewReader(own, "be", set)
	added := func() float64 {
		return testenv.Gauge(t, reg, "haproxy_weighter_backend_peers_added", map[string]string{"backend": "be"})
	}
	testenv.WaitFor(t, "the peer added", func() bool {
		_, err := r.ReadLocal(ctx, testenv.Servers("s1"))
		require.NoError(t, err)
		return added() == 1
	})
	own.fail.Store(true)
	_, err := r.ReadLocal(ctx, testenv.Servers("s1"))
	require.Error(t, err)
	assert.Equal(t, 0.0, added())
}

// haproxyReader reads the bytes in of an HAProxy backend's servers from its
// newest `show sess all`, with their addresses, as the daemon's fast reader
// does.
type haproxyReader struct{ b *haproxy.RuntimeBackend }

func (r haproxyReader) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	got, err := r.b.ReadLocal(ctx, haproxy.LocalQuery{Counter: haproxy.CounterBytesIn, Servers: weighter.Names(servers)})
	return got.LocalRead, err
}

package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// servePeer serves a peer answer for backend be with server s1 at rate B/s.
func servePeer(t *testing.T, rate string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"instance":"other","backends":{"be":{"age_seconds":0.1,"span_seconds":1,`+
			`"servers":{"s1":{"bytes_per_second":%s,"sessions":1}}}}}`, rate)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A cycle reads its peers' readings while a reload changes the peers: the
// two must not race on the set of peers.
func TestPeerReadingsDuringReload(t *testing.T) {
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	a, b := servePeer(t, "10"), servePeer(t, "20")
	set.set(ctx, []string{a}, 400*time.Millisecond)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				set.readings("be")
			}
		}
	}()
	for i := range 50 {
		if i%2 == 0 {
			set.set(ctx, []string{a, b}, 400*time.Millisecond)
		} else {
			set.set(ctx, []string{a}, 400*time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
}

// growingReader is a LocalReader whose server s1 moves 1,000 bytes between
// two reads, a second apart.
type growingReader struct {
	n    int
	last time.Time
}

func (g *growingReader) ReadLocal(context.Context, []string) (weighter.LocalRead, error) {
	g.n++
	at := time.Unix(1_000_000+int64(g.n), 0)
	r := weighter.LocalRead{At: at, Since: g.last, Servers: map[string]weighter.LocalCounter{
		"s1": {Bytes: float64(1000 * g.n), Rate: 1000, Sessions: 1, Reset: g.last.IsZero()}}}
	g.last = at
	return r, nil
}

// A peer claiming an absurd rate (beyond any server's) is garbage, left
// out: added to the byte counter it would swamp the own bytes for good (a
// float64 beside 1e300 no longer counts them), and the calibration with it.
func TestPeerAbsurdRateIsLeftOut(t *testing.T) {
	set := newPeerSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.stop() })
	huge := servePeer(t, "1e300")
	set.set(ctx, []string{huge}, 400*time.Millisecond)
	waitFor(t, "the peer asked", func() bool {
		set.peers[huge].mu.Lock()
		defer set.peers[huge].mu.Unlock()
		return set.peers[huge].problem != "not asked yet"
	})
	r := newPeeredReader(&growingReader{}, "be", set)
	var reads []weighter.LocalRead
	for range 3 {
		got, err := r.ReadLocal(ctx, []string{"s1"})
		require.NoError(t, err)
		reads = append(reads, got)
	}
	assert.Contains(t, reads[2].Peers, "garbage")
	assert.Equal(t, 1000.0, reads[2].Servers["s1"].Rate)
	assert.Equal(t, 1000.0, reads[2].Servers["s1"].Bytes-reads[1].Servers["s1"].Bytes, "the own bytes still count")
}

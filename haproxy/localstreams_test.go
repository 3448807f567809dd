package haproxy

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func withClient(s dumpedStream, id, client string) dumpedStream {
	s.id, s.client = id, client
	return s
}

func TestLocalAccOpenStreamsHaveTheirOwnRates(t *testing.T) {
	a := newLocalAcc()
	a.apply(dumpAt(0, 100,
		withClient(ds(1, 10, "s1", 1000, 50, time.Minute), "0x1", "10.0.0.7:51234"),
		withClient(ds(2, 11, "s2", 0, 0, time.Second), "0x2", "10.0.0.8:40000")))
	r := readIn(a)
	require.Len(t, r.Open, 2)
	for _, s := range r.Open {
		assert.True(t, math.IsNaN(s.Rate), "the first dump gives no stream a rate")
	}
	// 2 s later: stream 1 sent 400 more; address 2 now holds a new stream
	// (serial 12), which has no rate yet; a third stream has no server yet.
	a.apply(dumpAt(2, 120,
		withClient(ds(1, 10, "s1", 1400, 90, time.Minute+2*time.Second), "0x1", "10.0.0.7:51234"),
		withClient(ds(2, 12, "s2", 300, 0, 500*time.Millisecond), "0x2", "10.0.0.9:40001"),
		withClient(ds(3, 13, "", 10, 0, time.Millisecond), "0x3", "10.0.0.10:1")))
	r = readIn(a)
	require.Len(t, r.Open, 2, "a stream without a server is not open on one")
	assert.Equal(t, weighter.ShedSession{ID: "0x1", Serial: 10, Server: "s1", Client: "10.0.0.7:51234", Age: time.Minute + 2*time.Second, Rate: 200}, r.Open[0])
	assert.Equal(t, "0x2", r.Open[1].ID)
	assert.Equal(t, uint64(12), r.Open[1].Serial)
	assert.True(t, math.IsNaN(r.Open[1].Rate), "a new stream at a reused address has no rate")

	both := a.reading("be", LocalQuery{Counter: LocalBoth, Open: true}, 3)
	assert.Equal(t, 220.0, both.Open[0].Rate, "the query's direction: in + out")

	// Stream 1 ends: it is no longer open.
	a.apply(dumpAt(4, 130, withClient(ds(2, 12, "s2", 500, 0, 2500*time.Millisecond), "0x2", "10.0.0.9:40001")))
	r = readIn(a)
	require.Len(t, r.Open, 1)
	assert.Equal(t, 100.0, r.Open[0].Rate)
	assert.Empty(t, a.reading("other", LocalQuery{Open: true}, 3).Open, "another backend's streams are not listed")
	assert.Nil(t, a.reading("be", LocalQuery{}, 3).Open, "not listed unless asked for")
}

// Over random dumps, a server's rate is the sum of what its streams moved:
// the rated open streams' rates never add up to more than the server's rate,
// and exactly to it when every stream of the span was listed by both dumps.
func TestLocalAccOpenRatesAddUpToTheServer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		a := newLocalAcc()
		type st struct {
			key    streamKey
			server string
			in     uint64
		}
		var live []st
		next := uint64(1)
		sec := 0.0
		for dump := range 8 {
			churn := false
			// Streams end, open, and send.
			for i := 0; i < len(live); i++ {
				if rng.IntN(6) == 0 {
					live = append(live[:i], live[i+1:]...)
					i--
					churn = true
				}
			}
			for range rng.IntN(3) {
				live = append(live, st{key: streamKey{next, next}, server: []string{"s1", "s2"}[rng.IntN(2)]})
				next++
				churn = true
			}
			var d []dumpedStream
			for i := range live {
				live[i].in += uint64(rng.IntN(5000))
				d = append(d, ds(live[i].key.id, live[i].key.serial, live[i].server, live[i].in, 0, time.Second))
			}
			sec += 0.5 + rng.Float64()*2
			a.apply(dumpAt(sec, 10_000+uint64(dump), d...))
			r := readIn(a)
			if dump == 0 {
				continue
			}
			for _, name := range []string{"s1", "s2"} {
				sum := 0.0
				for _, s := range r.Open {
					if s.Server == name && !math.IsNaN(s.Rate) {
						sum += s.Rate
					}
				}
				server := r.Servers[name]
				if server.Reset {
					continue
				}
				assert.LessOrEqual(t, sum, server.Rate+1e-6, "trial %d dump %d %s", trial, dump, name)
				if !churn {
					assert.InDelta(t, server.Rate, sum, 1e-6, "trial %d dump %d %s", trial, dump, name)
				}
			}
		}
	}
}

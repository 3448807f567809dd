package haproxy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// localScenario is a real HAProxy with two frontends: fe_a → be_a
// (roundrobin, s1 and s2) and fe_b → be_b (t1), every server a discard
// server, so bytes_in moves and bytes_out does not.
type localScenario struct {
	h          *testenv.HAProxy
	c          *Client
	feA, feB   int
	dumps      atomic.Int64 // `show sess all` sent
	clockMu    sync.Mutex
	fakeNow    time.Time
	fakeClock  bool
	extraLines string
}

func startLocalScenario(t *testing.T, contstats bool) *localScenario {
	t.Helper()
	sc := &localScenario{feA: testenv.FreePort(t), feB: testenv.FreePort(t)}
	defaults := testenv.HAProxyDefaults
	if contstats {
		defaults += "  option contstats\n"
	}
	sc.h = testenv.StartHAProxy(t, defaults+fmt.Sprintf(`
frontend fe_a
  bind 127.0.0.1:%d
  default_backend be_a
frontend fe_b
  bind 127.0.0.1:%d
  default_backend be_b
backend be_a
  balance roundrobin
  server s1 %s
  server s2 %s
backend be_b
  server t1 %s
`, sc.feA, sc.feB, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)))
	sc.c = newClient(t, sc.h.Socket)
	sc.c.trace = func(cmds []string) {
		if len(cmds) == 1 && cmds[0] == "show sess all" {
			sc.dumps.Add(1)
		}
	}
	// Every read dumps, unless a test sets a budget.
	sc.c.SetLocalBudget(LocalBudget{Share: time.Nanosecond, PerStream: time.Nanosecond})
	return sc
}

// useFakeClock stamps dumps with a clock that moves only by advance. It
// starts an hour ahead, past any dump the real clock stamped.
func (sc *localScenario) useFakeClock() {
	sc.fakeNow = time.Now().Add(time.Hour)
	sc.c.local.now = func() time.Time {
		sc.clockMu.Lock()
		defer sc.clockMu.Unlock()
		return sc.fakeNow
	}
}

func (sc *localScenario) advance(d time.Duration) {
	sc.clockMu.Lock()
	defer sc.clockMu.Unlock()
	sc.fakeNow = sc.fakeNow.Add(d)
}

// waitLocal reads be until done accepts the reading, and checks every
// reading on the way: each server's Rate is its Bytes' growth since the
// reading before over the span between their times, and no Bytes decreases.
func waitLocal(t *testing.T, b *RuntimeBackend, q LocalQuery, done func(StreamsReading) bool) StreamsReading {
	t.Helper()
	var prev StreamsReading
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := b.ReadLocal(testCtx(t), q)
		require.NoError(t, err)
		if !prev.At.IsZero() && r.Since.Equal(prev.At) {
			for name, s := range r.Servers {
				p, ok := prev.Servers[name]
				if !ok || s.Reset {
					continue
				}
				require.GreaterOrEqual(t, s.Bytes, p.Bytes, name)
				assert.InDelta(t, float64(s.Bytes-p.Bytes), s.Rate*r.At.Sub(r.Since).Seconds(), 1e-6*float64(s.Bytes+1), name)
			}
		}
		if done(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %s: local signal never got there; last reading %+v", b.Name(), r)
		}
		prev = r
		time.Sleep(5 * time.Millisecond)
	}
}

// serverOf waits until the backend has one more stream open than before and
// returns the server it went to.
func serverOf(t *testing.T, b *RuntimeBackend, before StreamsReading) string {
	t.Helper()
	var got string
	waitLocal(t, b, LocalQuery{}, func(r StreamsReading) bool {
		for name, open := range r.OpenAt {
			if open > before.OpenAt[name] {
				got = name
				return true
			}
		}
		return false
	})
	return got
}

// TestLocalLiveCountsBytes sends known bytes through known servers of a real
// HAProxy, with and without option contstats, and checks the counters to the
// byte: growth on open streams, a stream that closes keeps its bytes, a new
// stream adds its own. The per-stream sum does not read show stat, so
// contstats must change nothing.
func TestLocalLiveCountsBytes(t *testing.T) {
	results := map[bool][]float64{}
	for _, contstats := range []bool{false, true} {
		t.Run(fmt.Sprintf("contstats=%v", contstats), func(t *testing.T) {
			sc := startLocalScenario(t, contstats)
			be := sc.c.Backend("be_a")
			q := LocalQuery{Servers: []string{"s1", "s2"}}
			r0, err := be.ReadLocal(testCtx(t), q)
			require.NoError(t, err)
			assert.Equal(t, []string{"s1", "s2"}, slices.Sorted(maps.Keys(r0.Servers)))
			c1 := dialFront(t, sc.feA)
			srv1 := serverOf(t, be, r0)
			r1 := waitLocal(t, be, q, func(StreamsReading) bool { return true })
			c2 := dialFront(t, sc.feA)
			srv2 := serverOf(t, be, r1)
			require.NotEqual(t, srv1, srv2, "roundrobin alternates")
			base := waitLocal(t, be, q, func(r StreamsReading) bool { return r.OpenAt[srv1] == 1 && r.OpenAt[srv2] == 1 })

			write(t, c1, 10_000)
			write(t, c2, 30_000)
			grown := func(a, b float64) func(StreamsReading) bool {
				return func(r StreamsReading) bool {
					return r.Servers[srv1].Bytes-base.Servers[srv1].Bytes >= a && r.Servers[srv2].Bytes-base.Servers[srv2].Bytes >= b
				}
			}
			r := waitLocal(t, be, q, grown(10_000, 30_000))
			assert.Equal(t, float64(10_000), r.Servers[srv1].Bytes-base.Servers[srv1].Bytes)
			assert.Equal(t, float64(30_000), r.Servers[srv2].Bytes-base.Servers[srv2].Bytes)
			assert.Equal(t, 1.0, r.Servers[srv1].Sessions, "open over the whole span")
			assert.False(t, r.Servers[srv1].Reset)

			// c1 sends 5,000 more; once counted, it closes: the counter keeps them.
			write(t, c1, 5_000)
			waitLocal(t, be, q, grown(15_000, 30_000))
			require.NoError(t, c1.Close())
			r = waitLocal(t, be, q, func(r StreamsReading) bool { return r.OpenAt[srv1] == 0 })
			assert.Equal(t, float64(15_000), r.Servers[srv1].Bytes-base.Servers[srv1].Bytes)
			r = waitLocal(t, be, q, func(StreamsReading) bool { return true })
			assert.Equal(t, float64(15_000), r.Servers[srv1].Bytes-base.Servers[srv1].Bytes, "a closed stream's bytes stay")
			assert.Zero(t, r.Servers[srv1].Rate)

			// A new stream (roundrobin: back on srv1) adds its own.
			c3 := dialFront(t, sc.feA)
			write(t, c3, 2_000)
			r = waitLocal(t, be, q, grown(17_000, 30_000))
			assert.Equal(t, float64(17_000), r.Servers[srv1].Bytes-base.Servers[srv1].Bytes)
			assert.Equal(t, float64(30_000), r.Servers[srv2].Bytes-base.Servers[srv2].Bytes)

			// Nothing came back from the discard servers.
			out, err := be.ReadLocal(testCtx(t), LocalQuery{Counter: CounterBytesOut})
			require.NoError(t, err)
			assert.Zero(t, out.Servers[srv1].Bytes+out.Servers[srv2].Bytes)
			both, err := be.ReadLocal(testCtx(t), LocalQuery{Counter: LocalBoth})
			require.NoError(t, err)
			assert.Equal(t, float64(47_000), both.Servers[srv1].Bytes+both.Servers[srv2].Bytes-
				base.Servers[srv1].Bytes-base.Servers[srv2].Bytes)
			results[contstats] = []float64{r.Servers[srv1].Bytes - base.Servers[srv1].Bytes, r.Servers[srv2].Bytes - base.Servers[srv2].Bytes}
		})
	}
	assert.Equal(t, results[false], results[true], "contstats changes nothing")
}

// TestLocalLiveBudget counts the dumps: backends share one, and the next one
// waits for max(Share, streams × PerStream) after the previous one began;
// meanwhile the reading is the same, with its own time.
func TestLocalLiveBudget(t *testing.T) {
	sc := startLocalScenario(t, false)
	a, b := sc.c.Backend("be_a"), sc.c.Backend("be_b")
	ca, cb := dialFront(t, sc.feA), dialFront(t, sc.feB)
	write(t, ca, 100)
	write(t, cb, 300)
	// Wait, dumping freely, until HAProxy shows both streams' bytes.
	waitLocal(t, b, LocalQuery{}, func(r StreamsReading) bool { return r.Servers["t1"].Bytes == 300 })
	waitLocal(t, a, LocalQuery{}, func(r StreamsReading) bool { return r.Servers["s1"].Bytes+r.Servers["s2"].Bytes == 100 })

	// Two streams and the CLI's own: 3 × 1 s > Share 2 s.
	sc.c.SetLocalBudget(LocalBudget{Share: 2 * time.Second, PerStream: time.Second})
	sc.useFakeClock()
	before := sc.dumps.Load()
	ra, err := a.ReadLocal(testCtx(t), LocalQuery{})
	require.NoError(t, err)
	rb, err := b.ReadLocal(testCtx(t), LocalQuery{})
	require.NoError(t, err)
	assert.Equal(t, before+1, sc.dumps.Load(), "one dump for both backends")
	assert.Equal(t, ra.At, rb.At)
	assert.Equal(t, float64(300), rb.Servers["t1"].Bytes)
	assert.Equal(t, 3, ra.Streams)
	assert.Equal(t, ra.At.Add(3*time.Second), ra.Next)
	assert.Zero(t, ra.Age)

	sc.advance(2 * time.Second)
	again, err := a.ReadLocal(testCtx(t), LocalQuery{})
	require.NoError(t, err)
	assert.Equal(t, before+1, sc.dumps.Load(), "streams × PerStream not yet passed")
	assert.Equal(t, ra.At, again.At, "the same reading, with its own time")
	assert.Equal(t, 2*time.Second, again.Age)
	assert.Equal(t, ra.Servers, again.Servers)

	sc.advance(time.Second)
	write(t, cb, 50)
	// The write may take a moment to reach HAProxy: dump until it shows, each
	// dump after the budget allows it.
	var last StreamsReading
	for i := 0; ; i++ {
		last, err = b.ReadLocal(testCtx(t), LocalQuery{})
		require.NoError(t, err)
		require.Equal(t, before+2+int64(i), sc.dumps.Load())
		if last.Servers["t1"].Bytes == 350 {
			break
		}
		require.Less(t, i, 500)
		sc.advance(3 * time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	assert.Equal(t, 50/last.At.Sub(last.Since).Seconds(), last.Servers["t1"].Rate, "the rate over the span since the dump before")

	// With the streams closed, the dump is small and Share decides.
	require.NoError(t, ca.Close())
	require.NoError(t, cb.Close())
	for i := 0; ; i++ {
		sc.advance(3 * time.Second)
		r, err := b.ReadLocal(testCtx(t), LocalQuery{})
		require.NoError(t, err)
		if r.Streams == 1 {
			assert.Equal(t, r.At.Add(2*time.Second), r.Next)
			break
		}
		require.Less(t, i, 2000, "the closed streams are still listed: %+v", r)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLocalLiveConcurrentReadsShareOneDump: backends reading at the same
// moment wait for the one dump in flight instead of sending their own.
func TestLocalLiveConcurrentReadsShareOneDump(t *testing.T) {
	sc := startLocalScenario(t, false)
	sc.c.SetLocalBudget(LocalBudget{Share: time.Hour})
	var wg sync.WaitGroup
	ats := make([]time.Time, 8)
	for i := range ats {
		wg.Go(func() {
			be := []string{"be_a", "be_b"}[i%2]
			r, err := sc.c.Backend(be).ReadLocal(testCtx(t), LocalQuery{})
			assert.NoError(t, err)
			ats[i] = r.At
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), sc.dumps.Load())
	for _, at := range ats {
		assert.Equal(t, ats[0], at)
	}
}

// TestLocalLiveServerAdded: a server added at runtime appears in the reading
// once it carries a stream, with Reset (no earlier count to compare with),
// even when the caller does not name it yet.
func TestLocalLiveServerAdded(t *testing.T) {
	sc := startLocalScenario(t, false)
	be := sc.c.Backend("be_a")
	q := LocalQuery{Servers: []string{"s1", "s2"}}
	_, err := be.ReadLocal(testCtx(t), q)
	require.NoError(t, err)
	add := raw(t, sc.c, "add server be_a/s3 "+testenv.StartDiscardServer(t))
	require.Contains(t, add, "New server registered", add)
	for _, cmd := range []string{"enable server be_a/s3", "set server be_a/s1 weight 0", "set server be_a/s2 weight 0"} {
		require.Empty(t, strings.TrimSpace(raw(t, sc.c, cmd)), cmd)
	}
	c := dialFront(t, sc.feA)
	write(t, c, 4_000)
	first := waitLocal(t, be, q, func(r StreamsReading) bool { _, ok := r.Servers["s3"]; return ok })
	assert.Equal(t, []string{"s1", "s2", "s3"}, slices.Sorted(maps.Keys(first.Servers)))
	assert.True(t, first.Servers["s3"].Reset, "first count of s3")
	assert.Zero(t, first.Servers["s3"].Rate, "no rate on a first count")
	r := waitLocal(t, be, q, func(r StreamsReading) bool { return r.Servers["s3"].Bytes == 4_000 })
	next := waitLocal(t, be, q, func(StreamsReading) bool { return true })
	assert.False(t, next.Servers["s3"].Reset)
	assert.Equal(t, r.Servers["s3"].Bytes, next.Servers["s3"].Bytes)
	assert.Zero(t, next.Servers["s1"].Bytes+next.Servers["s2"].Bytes, "weight 0 takes no new stream")
}

// TestLocalLiveRestart: HAProxy restarts (all streams gone, stream numbers
// start again). The reader says so once, and its counters go on from where
// they were: the new process's streams add to them.
func TestLocalLiveRestart(t *testing.T) {
	sc := startLocalScenario(t, false)
	be := sc.c.Backend("be_b")
	c := dialFront(t, sc.feB)
	write(t, c, 6_000)
	waitLocal(t, be, LocalQuery{}, func(r StreamsReading) bool { return r.Servers["t1"].Bytes == 6_000 })
	assert.False(t, restarted(be))
	// More CLI streams in the old process than the new one will have had by
	// its first dump, so the stream numbers visibly go back.
	for range 20 {
		_, err := be.ReadLocal(testCtx(t), LocalQuery{})
		require.NoError(t, err)
	}
	sc.h.Restart()
	r, err := be.ReadLocal(testCtx(t), LocalQuery{})
	require.NoError(t, err)
	assert.True(t, restarted(be))
	assert.Equal(t, float64(6_000), r.Servers["t1"].Bytes, "the counter does not go back")
	assert.False(t, r.Servers["t1"].Reset)
	c2 := dialFront(t, sc.feB)
	write(t, c2, 1_500)
	r = waitLocal(t, be, LocalQuery{}, func(r StreamsReading) bool { return r.Servers["t1"].Bytes == 7_500 })
	assert.False(t, restarted(be))
}

// restarted reports whether the newest dump of b's Client was of another
// HAProxy process than the dump before.
func restarted(b *RuntimeBackend) bool {
	st := &b.c.local
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.acc.restarted
}

// TestLocalLiveDead: a stream open and idle makes the signal dead after
// DeadAfter dumps; a byte moving revives it. bytes_out, which never moves
// towards a discard server, stays dead meanwhile.
func TestLocalLiveDead(t *testing.T) {
	sc := startLocalScenario(t, false)
	sc.useFakeClock()
	sc.c.SetLocalBudget(LocalBudget{Share: time.Second, PerStream: time.Nanosecond, DeadAfter: 3})
	be := sc.c.Backend("be_b")
	c := dialFront(t, sc.feB)
	read := func(q LocalQuery) StreamsReading {
		sc.advance(2 * time.Second)
		r, err := be.ReadLocal(testCtx(t), q)
		require.NoError(t, err)
		return r
	}
	require.Eventually(t, func() bool { return read(LocalQuery{}).OpenAt["t1"] == 1 }, 10*time.Second, 5*time.Millisecond)
	r := read(LocalQuery{})
	for i := 0; r.Dead == nil; i++ {
		require.Less(t, i, 5, "still alive after %d dumps", i+2)
		r = read(LocalQuery{})
	}
	require.ErrorIs(t, r.Dead, ErrLocalSignalDead)
	assert.ErrorContains(t, r.Dead, "backend be_b: 1 streams open, no bytes_in total moved over the last 3 dumps (6s)")
	write(t, c, 10)
	require.Eventually(t, func() bool { return read(LocalQuery{}).Dead == nil }, 10*time.Second, 5*time.Millisecond)
	r = read(LocalQuery{Counter: CounterBytesOut})
	assert.ErrorIs(t, r.Dead, ErrLocalSignalDead, "nothing comes back from a discard server")
}

// TestLocalLiveUnreachable: a failed dump is an error, and is not retried by
// every call: the next dump waits Share. The counters survive the outage.
func TestLocalLiveUnreachable(t *testing.T) {
	sc := startLocalScenario(t, false)
	sc.useFakeClock()
	sc.c.SetLocalBudget(LocalBudget{Share: 2 * time.Second})
	be := sc.c.Backend("be_b")
	c := dialFront(t, sc.feB)
	write(t, c, 800)
	require.Eventually(t, func() bool {
		sc.advance(2 * time.Second)
		r, err := be.ReadLocal(testCtx(t), LocalQuery{})
		require.NoError(t, err)
		return r.Servers["t1"].Bytes == 800
	}, 10*time.Second, 5*time.Millisecond)
	sc.h.Kill()
	sc.advance(2 * time.Second)
	n := sc.dumps.Load()
	_, err := be.ReadLocal(testCtx(t), LocalQuery{})
	require.Error(t, err)
	assert.ErrorContains(t, err, "backend be_b: local signal: show sess all")
	sc.advance(time.Second)
	_, err2 := sc.c.Backend("be_a").ReadLocal(testCtx(t), LocalQuery{})
	require.Error(t, err2)
	assert.Equal(t, n+1, sc.dumps.Load(), "the second call within Share did not dial")
	sc.h.Restart()
	sc.advance(time.Second)
	r, err := be.ReadLocal(testCtx(t), LocalQuery{})
	require.NoError(t, err)
	assert.Equal(t, float64(800), r.Servers["t1"].Bytes)
}

// TestLocalLiveContstatsDoubleCount is why the counters are per-stream sums
// and not show stat's bin plus the open streams' totals: with option
// contstats, bin takes an open stream's bytes every few seconds, and the sum
// then counts them twice. The per-stream sum still counts each byte once.
func TestLocalLiveContstatsDoubleCount(t *testing.T) {
	sc := startLocalScenario(t, true)
	be := sc.c.Backend("be_b")
	base, err := be.ReadLocal(testCtx(t), LocalQuery{Servers: []string{"t1"}})
	require.NoError(t, err)
	c := dialFront(t, sc.feB)
	write(t, c, 20_000)
	waitLocal(t, be, LocalQuery{}, func(r StreamsReading) bool { return r.Servers["t1"].Bytes-base.Servers["t1"].Bytes == 20_000 })
	// contstats moves bin about every 5 s for an open connection.
	var bin uint64
	require.Eventually(t, func() bool {
		stats, err := sc.c.Stats(testCtx(t), "be_b")
		require.NoError(t, err)
		bin = stats[0].BytesIn
		return bin > 0
	}, 20*time.Second, 100*time.Millisecond)
	open, err := be.Sessions(testCtx(t))
	require.NoError(t, err)
	require.Len(t, open, 1)
	assert.Equal(t, int64(20_000), open[0].ReqBytes)
	assert.Greater(t, bin+uint64(open[0].ReqBytes), uint64(20_000), "bin + open totals counts the flushed bytes twice")
	r, err := be.ReadLocal(testCtx(t), LocalQuery{})
	require.NoError(t, err)
	assert.Equal(t, float64(20_000), r.Servers["t1"].Bytes-base.Servers["t1"].Bytes)
	t.Logf("contstats: bin %d + open stream's total %d = %d for 20000 bytes sent; per-stream sum %v",
		bin, open[0].ReqBytes, bin+uint64(open[0].ReqBytes), r.Servers["t1"].Bytes-base.Servers["t1"].Bytes)
}

// TestLocalLiveNewClientResets: the counters are a Client's own sums, so a
// new Client (a reload builds one) reports every server with Reset.
func TestLocalLiveNewClientResets(t *testing.T) {
	sc := startLocalScenario(t, false)
	c := dialFront(t, sc.feB)
	write(t, c, 700)
	waitLocal(t, sc.c.Backend("be_b"), LocalQuery{}, func(r StreamsReading) bool { return r.Servers["t1"].Bytes == 700 })
	again, err := sc.c.Backend("be_b").ReadLocal(testCtx(t), LocalQuery{})
	require.NoError(t, err)
	assert.False(t, again.Servers["t1"].Reset)
	fresh := newClient(t, sc.h.Socket)
	r, err := fresh.Backend("be_b").ReadLocal(testCtx(t), LocalQuery{})
	require.NoError(t, err)
	assert.True(t, r.Servers["t1"].Reset)
	assert.Equal(t, float64(700), r.Servers["t1"].Bytes, "the open stream's total so far")
	assert.True(t, r.Since.IsZero())
}

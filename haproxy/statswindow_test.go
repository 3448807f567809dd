package haproxy

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// at is start plus sec seconds.
func at(start time.Time, sec float64) time.Time {
	return start.Add(time.Duration(sec * float64(time.Second)))
}

func windowSource(t *testing.T, cfg StatsConfig, r StatsReader, clock func() time.Time) *StatsSource {
	t.Helper()
	switch r := r.(type) { // stamp the reads with the test's clock
	case *scriptedStats:
		r.now = clock
	case *RuntimeBackend:
		r.now = clock
	}
	src, err := NewStatsSource(cfg, "be", r, nil)
	require.NoError(t, err)
	return src
}

func stat(name string, bytesIn, scur uint64) ServerStat {
	return ServerStat{Server: name, BytesIn: bytesIn, CurrentSessions: scur}
}

// TestHAProxyStatsRateWindow: with the default window (10 s) and no
// sample_interval, the first cycles have no point (the weights hold) until the
// reads span the window; then each rate is taken from the newest read at least
// the window old (a tenth less accepted), not from the previous read, and per
// connection it is divided by the time-weighted mean of scur over those reads.
func TestHAProxyStatsRateWindow(t *testing.T) {
	// Reads at 0, 3, 6, 9.5, 13, 15 s.
	r := &scriptedStats{reads: [][]ServerStat{
		{stat("a", 0, 2), stat("b", 0, 0)},
		{stat("a", 300, 2), stat("b", 0, 0)},
		{stat("a", 600, 4), stat("b", 50, 1)},
		{stat("a", 950, 4), stat("b", 50, 0)},
		{stat("a", 2000, 2), stat("b", 50, 0)},
		{stat("a", 2100, 2), stat("b", 50, 0)},
	}}
	clock := testenv.NewClock()
	start := clock.Now()
	src := windowSource(t, StatsConfig{Counter: "bytes_in", PerConnection: true}, r, clock.Now)
	ctx := context.Background()
	fetch := func(sec float64) weighter.Loads {
		t.Helper()
		clock.Set(at(start, sec))
		loads, err := src.Fetch(ctx, nil)
		require.NoError(t, err)
		return loads
	}

	for _, sec := range []float64{0, 3, 6} {
		assert.Empty(t, fetch(sec), "at %gs the reads span less than the window: no point, the cycle holds", sec)
	}
	assert.Equal(t, 3, r.calls, "no wait and no second read without sample_interval")

	// 9.5 s: within a tenth of the window, so from the read at 0.
	loads := fetch(9.5)
	require.Len(t, loads, 2)
	// scur 2,2,4,4 at 0,3,6,9.5: (2·3 + 3·3 + 4·3.5)/9.5.
	mean := (2*3 + 3*3 + 4*3.5) / 9.5
	assert.InDelta(t, 950/9.5/mean, loads["a"][0].Value, 1e-9)
	assert.Equal(t, clock.Now(), loads["a"][0].Time)
	// b: bytes, and sessions at one read of four.
	// b: scur 0,0,1,0: (0.5·3 + 0.5·3.5)/9.5.
	assert.InDelta(t, 50/9.5/(3.25/9.5), loads["b"][0].Value, 1e-9)

	// 13 s: from the read at 3 (the newest at least 9 s old), not from 9.5.
	loads = fetch(13)
	mean = (3*3 + 4*3.5 + 3*3.5) / 10
	assert.InDelta(t, 1700/10.0/mean, loads["a"][0].Value, 1e-9)
	assert.InDelta(t, 50/10.0/(3.25/10), loads["b"][0].Value, 1e-9)

	// 15 s: from the read at 6; b had no session at any read since: load 0.
	loads = fetch(15)
	mean = (4*3.5 + 3*3.5 + 2*2) / 9
	assert.InDelta(t, 1500/9.0/mean, loads["a"][0].Value, 1e-9)
	assert.Zero(t, loads["b"][0].Value, "no session at any read of the window")
	assert.LessOrEqual(t, historyLen(src, "a"), 4, "reads older than the window's base are dropped")
}

// TestHAProxyStatsRateWindowServersComeAndGo: a new server, one that left and
// came back, and one whose counter went down each have no point until their
// own reads span the window again; the others are not affected.
func TestHAProxyStatsRateWindowServersComeAndGo(t *testing.T) {
	// Reads every 5 s.
	r := &scriptedStats{reads: [][]ServerStat{
		{stat("a", 0, 1), stat("b", 0, 1), stat("c", 0, 1)},                           // 0
		{stat("a", 50, 1), stat("b", 50, 1), stat("c", 50, 1)},                        // 5
		{stat("a", 100, 1), stat("c", 100, 1), stat("d", 1000, 1)},                    // 10: b gone, d new
		{stat("a", 150, 1), stat("b", 150, 1), stat("c", 7, 1), stat("d", 1050, 1)},   // 15: b back, c reset
		{stat("a", 200, 1), stat("b", 200, 1), stat("c", 57, 1), stat("d", 1100, 1)},  // 20
		{stat("a", 250, 1), stat("b", 250, 1), stat("c", 107, 1), stat("d", 1150, 1)}, // 25
	}}
	clock := testenv.NewClock()
	start := clock.Now()
	src := windowSource(t, StatsConfig{Counter: "bytes_in"}, r, clock.Now)
	got := map[float64][]string{}
	for _, sec := range []float64{0, 5, 10, 15, 20, 25} {
		clock.Set(at(start, sec))
		loads, err := src.Fetch(context.Background(), nil)
		require.NoError(t, err)
		for name, s := range loads {
			got[sec] = append(got[sec], name)
			assert.InDelta(t, 10.0, s[0].Value, 1e-9, "%s at %gs: 50 bytes per 5 s", name, sec)
		}
	}
	for sec, want := range map[float64][]string{
		0: nil, 5: nil, 10: {"a", "c"}, 15: {"a"},
		20: {"a", "d"}, 25: {"a", "b", "c", "d"},
	} {
		assert.ElementsMatch(t, want, got[sec], "servers with a point at %gs", sec)
	}
}

// TestHAProxyStatsSampleInterval: with sample_interval set, the first Fetch
// waits it and reads again, and rates cover all the reads so far until they
// span the window (for `once`, whose single cycle would otherwise hold).
func TestHAProxyStatsSampleInterval(t *testing.T) {
	r := &scriptedStats{reads: [][]ServerStat{
		{stat("a", 0, 1)}, {stat("a", 100, 1)}, {stat("a", 300, 1)}, {stat("a", 1300, 1)},
	}}
	var mu sync.Mutex
	tick := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { // each read one second after the one before
		mu.Lock()
		defer mu.Unlock()
		tick = tick.Add(time.Second)
		return tick
	}
	src := windowSource(t, StatsConfig{Counter: "bytes_in", SampleInterval: duration.Duration(time.Millisecond), RateWindow: duration.Duration(3 * time.Second)}, r, clock)
	want := []float64{100, 150, 1300.0 / 3} // over 1 s, 2 s, then the window (3 s)
	for i, w := range want {
		loads, err := src.Fetch(context.Background(), nil)
		require.NoError(t, err)
		assert.InDelta(t, w, loads["a"][0].Value, 1e-9, "fetch %d", i+1)
	}
	assert.Equal(t, 4, r.calls, "only the first fetch reads twice")
}

// TestHAProxyStatsRateWindowRealTraffic runs the window against a real HAProxy:
// idle connections held open give each server known sessions, short
// connections carry known bytes (counted when they close), and the source's
// clock is moved by hand so that no test waits a whole window. What each sink
// received and had open at each read is the reference: load × window × mean
// open connections must equal the bytes a sink received since the read at the
// start of the window, which two fetches back is not the previous read.
func TestHAProxyStatsRateWindowRealTraffic(t *testing.T) {
	sinks := []*sink{startSink(t), startSink(t), startSink(t)}
	front := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := testenv.HAProxyDefaults + "frontend fe\n  bind " + front + "\n  option contstats\n  default_backend be\n" +
		"backend be\n  balance roundrobin\n"
	for i, s := range sinks {
		cfg += fmt.Sprintf("  server s%d %s\n", i+1, s.l.Addr())
	}
	h := testenv.StartHAProxy(t, cfg)
	client, err := New(Config{Socket: h.Socket})
	require.NoError(t, err)
	clock := testenv.NewClock()
	start := clock.Now()
	src := windowSource(t, StatsConfig{Counter: "bytes_in", PerConnection: true}, client.Backend("be"), clock.Now)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	held := make([]net.Conn, 6)
	for i := range held {
		held[i] = dial(t, front)
		waitSessions(t, ctx, client, i+1)
	}
	waitOpen(t, ctx, sinks, 2, 2, 2)
	total := 0
	// snapshot is what the sinks received and hold open at one read.
	type snapshot struct {
		at    float64
		bytes []int64
		open  []int64
	}
	var snaps []snapshot
	fetch := func(sec float64, open ...int64) weighter.Loads {
		t.Helper()
		waitStats(t, ctx, client, total)
		waitSinks(t, ctx, sinks, total)
		waitOpen(t, ctx, sinks, open...)
		// HAProxy may still count a short session the sink has seen close:
		// the reference is the sinks, so wait until HAProxy agrees.
		waitSessions(t, ctx, client, int(open[0]+open[1]+open[2]))
		snaps = append(snaps, snapshot{sec, received(sinks), open})
		clock.Set(at(start, sec))
		loads, err := src.Fetch(ctx, nil)
		require.NoError(t, err)
		return loads
	}
	push := func(sizes ...int) {
		for _, n := range sizes {
			send(t, front, n)
			total += n
		}
	}
	// check compares loads with the sinks' bytes and open connections over snaps[from:].
	check := func(loads weighter.Loads, from int) {
		t.Helper()
		require.Len(t, loads, 3)
		w := snaps[from:]
		span := w[len(w)-1].at - w[0].at
		for i := range sinks {
			var area float64
			for k := 1; k < len(w); k++ {
				area += float64(w[k-1].open[i]+w[k].open[i]) / 2 * (w[k].at - w[k-1].at)
			}
			bytes := float64(w[len(w)-1].bytes[i] - w[0].bytes[i])
			require.Positive(t, bytes, "s%d got traffic", i+1)
			name := fmt.Sprintf("s%d", i+1)
			assert.InDelta(t, bytes, loads[name][0].Value*span*(area/span), 1+1e-9*bytes,
				"s%d: load × span × mean open connections = bytes received", i+1)
		}
	}

	assert.Empty(t, fetch(0, 2, 2, 2), "one read: no rate yet")
	push(120_000, 30_000, 90_000, 200_000, 7_000, 50_000)
	assert.Empty(t, fetch(5, 2, 2, 2), "5 s of a 10 s window: no point, the weights hold")
	// Close two held connections: sessions change inside the window.
	require.NoError(t, held[0].Close())
	require.NoError(t, held[1].Close())
	waitSessions(t, ctx, client, 4)
	waitOpenTotal(t, ctx, sinks, 4)
	open := []int64{sinks[0].open.Load(), sinks[1].open.Load(), sinks[2].open.Load()}
	push(40_000, 8_000, 64_000, 11_000, 300_000, 2_000)
	check(fetch(10, open...), 0)
	push(70_000, 5_000, 33_000)
	check(fetch(15, open...), 1) // from the read at 5 s, two fetches back

	// HAProxy restarted: its counters start again from 0, below the last read.
	h.Restart()
	for _, c := range held[2:] {
		c.Close()
	}
	total = 0
	bare := func(sec float64) weighter.Loads {
		t.Helper()
		waitStats(t, ctx, client, total)
		waitSessions(t, ctx, client, 0) // the short sessions are closed, as the sinks see them
		clock.Set(at(start, sec))
		loads, err := src.Fetch(ctx, nil)
		require.NoError(t, err)
		return loads
	}
	assert.Empty(t, bare(17), "counters went down: no point")
	push(9_000, 9_000, 9_000)
	assert.Empty(t, bare(22), "5 s after the reset: still no point")
	push(1_000)
	loads := bare(27)
	assert.Len(t, loads, 3, "a whole window after the reset")
	for name, s := range loads {
		assert.Zero(t, s[0].Value, "%s: no session open at any read since the restart", name)
	}
}

// waitOpenTotal polls until the sinks hold n connections open between them.
func waitOpenTotal(t *testing.T, ctx context.Context, sinks []*sink, n int64) {
	t.Helper()
	var got int64
	for ctx.Err() == nil {
		got = 0
		for _, s := range sinks {
			got += s.open.Load()
		}
		if got == n {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	t.Fatalf("sinks hold %d connections open, want %d", got, n)
}

// historyLen is the number of reads h keeps for server.
func historyLen(h *StatsSource, server string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.history.servers[server])
}

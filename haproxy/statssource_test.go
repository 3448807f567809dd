package haproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// scriptedStats returns the next read of a script on each call, stamped by
// its clock (time.Now when unset).
type scriptedStats struct {
	mu    sync.Mutex
	reads [][]ServerStat
	err   error
	calls int
	now   func() time.Time
}

func (s *scriptedStats) ReadStats(context.Context) ([]ServerStat, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	at := time.Now()
	if s.now != nil {
		at = s.now()
	}
	if s.err != nil {
		return nil, at, s.err
	}
	r := s.reads[0]
	if len(s.reads) > 1 {
		s.reads = s.reads[1:]
	}
	return r, at, nil
}

func newStatsSource(t *testing.T, counter string, r StatsReader) *StatsSource {
	t.Helper()
	src, err := NewStatsSource(StatsConfig{Counter: counter, SampleInterval: duration.Duration(time.Millisecond), RateWindow: duration.Duration(time.Nanosecond)}, "be", r, nil)
	require.NoError(t, err)
	return src
}

func TestHAProxyStatsConfigValidate(t *testing.T) {
	for _, c := range []string{"bytes_in", "bytes_out", "sessions_total", "current_sessions"} {
		assert.NoError(t, StatsConfig{Counter: c}.Validate(), c)
	}
	assert.ErrorContains(t, StatsConfig{Counter: "cpu"}.Validate(), `unknown counter "cpu"`)
	assert.ErrorContains(t, StatsConfig{Counter: "bytes_in", SampleInterval: duration.Duration(-time.Second)}.Validate(), "negative")
	assert.ErrorContains(t, StatsConfig{Counter: "bytes_in", RateWindow: duration.Duration(-time.Second)}.Validate(), "rate_window -1s is negative")
	for _, c := range []string{"bytes_in", "bytes_out", "sessions_total"} {
		assert.NoError(t, StatsConfig{Counter: c, PerConnection: true}.Validate(), c)
	}
	err := StatsConfig{Counter: "current_sessions", PerConnection: true}.Validate()
	assert.ErrorContains(t, err, "per_connection needs a rate counter (bytes_in, bytes_out or sessions_total), not current_sessions")
	_, err = NewStatsSource(StatsConfig{Counter: "current_sessions", PerConnection: true}, "be", &scriptedStats{}, nil)
	assert.ErrorContains(t, err, "per_connection")
}

// TestHAProxyStatsPerConnection: the rate is divided by the mean of scur at the
// two reads it comes from; a server empty at both reads has load 0.
func TestHAProxyStatsPerConnection(t *testing.T) {
	r := &scriptedStats{reads: [][]ServerStat{
		{{Server: "a", CurrentSessions: 2}, {Server: "b", CurrentSessions: 1}, {Server: "c", CurrentSessions: 4},
			{Server: "d", CurrentSessions: 0}, {Server: "e", CurrentSessions: 0}},
		{{Server: "a", BytesOut: 800, CurrentSessions: 2}, {Server: "b", BytesOut: 800, CurrentSessions: 3},
			{Server: "c", BytesOut: 800, CurrentSessions: 4}, {Server: "d", BytesOut: 500, CurrentSessions: 0},
			{Server: "e", BytesOut: 0, CurrentSessions: 1}},
	}}
	src, err := NewStatsSource(StatsConfig{Counter: "bytes_out", PerConnection: true, SampleInterval: duration.Duration(time.Millisecond), RateWindow: duration.Duration(time.Nanosecond)}, "be", r, nil)
	require.NoError(t, err)
	loads, err := src.Fetch(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, loads, 5)
	a := loads["a"][0].Value
	require.Positive(t, a)
	// The same 800 bytes: over 2 sessions (a), over (1+3)/2 = 2 (b), over 4 (c).
	assert.InDelta(t, a, loads["b"][0].Value, 1e-9*a, "mean of the sessions at the two reads")
	assert.InDelta(t, a/2, loads["c"][0].Value, 1e-9*a, "twice the sessions, half the load")
	assert.Zero(t, loads["d"][0].Value, "no session at either read: empty, the lightest")
	assert.Zero(t, loads["e"][0].Value, "no bytes over (0+1)/2 sessions")
}

func TestHAProxyStatsRatesAndResets(t *testing.T) {
	r := &scriptedStats{reads: [][]ServerStat{
		{{Server: "a", SessionsTotal: 10}, {Server: "b", SessionsTotal: 100}},
		{{Server: "a", SessionsTotal: 20}, {Server: "b", SessionsTotal: 130}},
		// HAProxy restarted: b's counter went down; c is new.
		{{Server: "a", SessionsTotal: 50}, {Server: "b", SessionsTotal: 5}, {Server: "c", SessionsTotal: 7}},
	}}
	src := newStatsSource(t, "sessions_total", r)
	ctx := context.Background()

	first, err := src.Fetch(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, r.calls, "first fetch reads twice")
	require.Len(t, first, 2)
	ratio := first["b"][0].Value / first["a"][0].Value
	assert.InDelta(t, 3.0, ratio, 1e-9, "rates proportional to counter deltas")

	second, err := src.Fetch(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, 3, r.calls, "later fetches read once")
	assert.Contains(t, second, "a")
	assert.NotContains(t, second, "b", "counter reset: no point, not a negative rate")
	assert.NotContains(t, second, "c", "new server: no previous read")
	dt := second["a"][0].Time.Sub(first["a"][0].Time).Seconds()
	assert.InDelta(t, 30.0, second["a"][0].Value*dt, 1e-6, "rate x interval = counter delta")
}

func TestHAProxyStatsGaugeAndErrors(t *testing.T) {
	r := &scriptedStats{reads: [][]ServerStat{{{Server: "a", CurrentSessions: 4}}}}
	loads, err := newStatsSource(t, "current_sessions", r).Fetch(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, 4.0, loads["a"][0].Value)
	assert.Equal(t, 1, r.calls, "a gauge needs one read")

	_, err = newStatsSource(t, "bytes_in", &scriptedStats{err: errors.New("boom")}).Fetch(context.Background(), nil)
	require.ErrorContains(t, err, "haproxy: source unreachable (show stat be): boom")
	_, err = newStatsSource(t, "bytes_in", &scriptedStats{reads: [][]ServerStat{{}}}).Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrNoServers)
	// what a person reads: the command and why, not an empty url
	assert.NotContains(t, err.Error(), "url")
	assert.Contains(t, err.Error(), "lists no servers")
}

// sink is a TCP server that reads and discards everything, counting the bytes
// as they arrive and the connections open.
type sink struct {
	l     net.Listener
	bytes atomic.Int64
	open  atomic.Int64
}

func startSink(t *testing.T) *sink {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &sink{l: l}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				s.open.Add(1)
				defer s.open.Add(-1)
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					s.bytes.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

// send pushes n bytes through HAProxy's frontend in one connection.
func send(t *testing.T, addr string, n int) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.Copy(c, io.LimitReader(zeros{}, int64(n)))
	require.NoError(t, err)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestHAProxyStatsRealTraffic pushes known amounts of bytes through a real
// HAProxy to three sink servers and checks that the bytes_in rates times the
// interval between the two reads match what each sink received.
func TestHAProxyStatsRealTraffic(t *testing.T) {
	sinks := []*sink{startSink(t), startSink(t), startSink(t)}
	front := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := testenv.HAProxyDefaults + "frontend fe\n  bind " + front + "\n  default_backend be\nbackend be\n  balance roundrobin\n"
	for i, s := range sinks {
		cfg += fmt.Sprintf("  server s%d %s\n", i+1, s.l.Addr())
	}
	h := testenv.StartHAProxy(t, cfg)
	client, err := New(Config{Socket: h.Socket})
	require.NoError(t, err)
	src, err := NewStatsSource(StatsConfig{Counter: "bytes_in", SampleInterval: duration.Duration(10 * time.Millisecond), RateWindow: duration.Duration(time.Nanosecond)}, "be", client.Backend("be"), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	before, err := src.Fetch(ctx, nil)
	require.NoError(t, err)
	require.Len(t, before, 3)
	for name, s := range before {
		assert.Zero(t, s[0].Value, "%s: no traffic yet", name)
	}

	// Roundrobin spreads the 6 connections 2 per server; sizes differ per connection.
	sizes := []int{300_000, 20_000, 5_000, 700_000, 1_000, 90_000}
	total := 0
	for _, n := range sizes {
		send(t, front, n)
		total += n
	}
	waitStats(t, ctx, client, total)
	waitSinks(t, ctx, sinks, total)

	after, err := src.Fetch(ctx, nil)
	require.NoError(t, err)
	require.Len(t, after, 3)
	for i, s := range sinks {
		name := fmt.Sprintf("s%d", i+1)
		dt := after[name][0].Time.Sub(before[name][0].Time).Seconds()
		assert.InDelta(t, float64(s.bytes.Load()), after[name][0].Value*dt, 1, "%s: rate x interval = bytes received", name)
	}

	// HAProxy restarted: the counters start again from 0, below the last read.
	h.Restart()
	reset, err := src.Fetch(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, reset, "no server has a valid point after a counter reset: %v", reset)
	again, err := src.Fetch(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, again, 3, "the read after the reset is the new base")
}

// TestHAProxyStatsPerConnectionRealTraffic holds known numbers of connections
// open to three sinks through a real HAProxy, pushes known bytes through them,
// and checks that each per-connection load times the interval times the mean
// of the sessions open at the two reads is what the sink received. `balance
// first` with maxconn 1, 2, 3 makes the connection counts known. Without
// `option contstats` HAProxy counts an open connection's bytes only when it
// closes; with it, about every 5 s, so each phase waits up to that long.
func TestHAProxyStatsPerConnectionRealTraffic(t *testing.T) {
	sinks := []*sink{startSink(t), startSink(t), startSink(t)}
	front := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := testenv.HAProxyDefaults + "frontend fe\n  bind " + front + "\n  option contstats\n  default_backend be\n" +
		"backend be\n  balance first\n"
	for i, s := range sinks {
		cfg += fmt.Sprintf("  server s%d %s maxconn %d\n", i+1, s.l.Addr(), i+1)
	}
	h := testenv.StartHAProxy(t, cfg)
	client, err := New(Config{Socket: h.Socket})
	require.NoError(t, err)
	src, err := NewStatsSource(StatsConfig{Counter: "bytes_in", PerConnection: true, SampleInterval: duration.Duration(10 * time.Millisecond), RateWindow: duration.Duration(time.Nanosecond)}, "be", client.Backend("be"), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Six connections fill s1 (1), s2 (2) and s3 (3), in that order.
	conns := make([]net.Conn, 6)
	for i := range conns {
		conns[i] = dial(t, front)
		waitSessions(t, ctx, client, i+1)
	}
	waitOpen(t, ctx, sinks, 1, 2, 3)
	base, err := src.Fetch(ctx, nil)
	require.NoError(t, err)

	// Phase 1: sessions 1, 2, 3 at both reads; different bytes per connection.
	sizes := []int{120_000, 30_000, 90_000, 200_000, 7_000, 50_000}
	for i, c := range conns {
		write(t, c, sizes[i])
	}
	total := sum(sizes)
	waitStats(t, ctx, client, total)
	waitSinks(t, ctx, sinks, total)
	p1, err := src.Fetch(ctx, nil)
	require.NoError(t, err)
	got := received(sinks)
	checkPerConn(t, base, p1, got, []float64{1, 2, 3})

	// Phase 2: s1's connection and two of s3's close after the read; s3's
	// mean is (3+1)/2 = 2, s1's (1+0)/2 with no bytes.
	for _, i := range []int{0, 3, 4} {
		require.NoError(t, conns[i].Close())
	}
	waitSessions(t, ctx, client, 3)
	waitOpen(t, ctx, sinks, 0, 2, 1)
	for i, n := range map[int]int{1: 40_000, 2: 8_000, 5: 64_000} {
		write(t, conns[i], n)
		total += n
	}
	waitStats(t, ctx, client, total)
	waitSinks(t, ctx, sinks, total)
	p2, err := src.Fetch(ctx, nil)
	require.NoError(t, err)
	now := received(sinks)
	checkPerConn(t, p1, p2, minus(now, got), []float64{0.5, 2, 2})
	assert.Zero(t, p2["s1"][0].Value, "s1: no bytes")

	// Phase 3: a short connection to the empty s1 comes and goes between two
	// reads: bytes, but no session at either read, so the lightest load, 0.
	send(t, front, 25_000)
	total += 25_000
	waitStats(t, ctx, client, total)
	waitSinks(t, ctx, sinks, total)
	// The bytes can be counted before HAProxy has closed the session: wait until
	// it has, so the read sees s1 empty again (under load this took a while).
	waitSessions(t, ctx, client, 3)
	p3, err := src.Fetch(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(25_000), sinks[0].bytes.Load()-now[0], "the short connection went to s1")
	assert.Zero(t, p3["s1"][0].Value, "s1: empty at both reads")
	for _, c := range []int{1, 2, 5} {
		require.NoError(t, conns[c].Close())
	}
}

// checkPerConn checks load × interval × mean sessions = bytes received, per server.
func checkPerConn(t *testing.T, prev, cur weighter.Loads, bytes []int64, sessions []float64) {
	t.Helper()
	require.Len(t, cur, len(bytes))
	for i, want := range bytes {
		name := fmt.Sprintf("s%d", i+1)
		dt := cur[name][0].Time.Sub(prev[name][0].Time).Seconds()
		got := cur[name][0].Value * dt * sessions[i]
		assert.InDelta(t, float64(want), got, 1+1e-9*float64(want), "%s: load × interval × sessions = bytes received", name)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func write(t *testing.T, c net.Conn, n int) {
	t.Helper()
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(10*time.Second)))
	_, err := c.Write(make([]byte, n))
	require.NoError(t, err)
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func received(sinks []*sink) []int64 {
	out := make([]int64, len(sinks))
	for i, s := range sinks {
		out[i] = s.bytes.Load()
	}
	return out
}

func minus(a, b []int64) []int64 {
	out := make([]int64, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}

// waitSessions polls until HAProxy counts n sessions open on the backend's servers.
func waitSessions(t *testing.T, ctx context.Context, c *Client, n int) {
	t.Helper()
	got := waitBackendSum(t, ctx, c, func(s ServerStat) uint64 { return s.CurrentSessions },
		func(sum uint64) bool { return sum == uint64(n) })
	if got != uint64(n) {
		t.Fatalf("haproxy counts %d of %d sessions", got, n)
	}
}

// waitBackendSum polls HAProxy until the sum of field over the backend's
// servers satisfies done, or ctx ends; it returns the last sum seen.
func waitBackendSum(t *testing.T, ctx context.Context, c *Client, field func(ServerStat) uint64, done func(uint64) bool) uint64 {
	t.Helper()
	var sum uint64
	for ctx.Err() == nil {
		stats, err := c.Stats(ctx, "be")
		require.NoError(t, err)
		sum = 0
		for _, s := range stats {
			sum += field(s)
		}
		if done(sum) {
			return sum
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	return sum
}

// waitOpen polls until each sink has the given number of connections open.
func waitOpen(t *testing.T, ctx context.Context, sinks []*sink, want ...int64) {
	t.Helper()
	got := make([]int64, len(sinks))
	for ctx.Err() == nil {
		for i, s := range sinks {
			got[i] = s.open.Load()
		}
		if slices.Equal(got, want) {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	t.Fatalf("sinks have %v connections open, want %v", got, want)
}

// waitStats polls until HAProxy's counters account for total bytes (the sinks
// may have read them a moment before HAProxy's counters are updated).
func waitStats(t *testing.T, ctx context.Context, c *Client, total int) {
	t.Helper()
	got := waitBackendSum(t, ctx, c, func(s ServerStat) uint64 { return s.BytesIn },
		func(sum uint64) bool { return sum >= uint64(total) })
	if got < uint64(total) {
		t.Fatalf("haproxy counted %d of %d bytes: %v", got, total, ctx.Err())
	}
}

// waitSinks polls until the sinks have read total bytes between them.
func waitSinks(t *testing.T, ctx context.Context, sinks []*sink, total int) {
	t.Helper()
	var got int64
	for ctx.Err() == nil {
		got = 0
		for _, s := range sinks {
			got += s.bytes.Load()
		}
		if got == int64(total) {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	t.Fatalf("sinks read %d of %d bytes", got, total)
}

var _ weighter.Source = (*StatsSource)(nil)

package sources_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// scriptedStats returns the next read of a script on each call.
type scriptedStats struct {
	mu    sync.Mutex
	reads [][]sources.ServerStat
	err   error
	calls int
}

func (s *scriptedStats) Stats(context.Context, string) ([]sources.ServerStat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return nil, s.err
	}
	r := s.reads[0]
	if len(s.reads) > 1 {
		s.reads = s.reads[1:]
	}
	return r, nil
}

func newStatsSource(t *testing.T, counter string, r sources.StatsReader) *sources.HAProxyStats {
	t.Helper()
	src, err := sources.NewHAProxyStats(sources.HAProxyStatsConfig{Counter: counter, SampleInterval: time.Millisecond}, "be", r, nil)
	require.NoError(t, err)
	return src
}

func TestHAProxyStatsConfigValidate(t *testing.T) {
	for _, c := range []string{"bytes_in", "bytes_out", "sessions_total", "current_sessions"} {
		assert.NoError(t, sources.HAProxyStatsConfig{Counter: c}.Validate(), c)
	}
	assert.ErrorContains(t, sources.HAProxyStatsConfig{Counter: "cpu"}.Validate(), `unknown counter "cpu"`)
	assert.ErrorContains(t, sources.HAProxyStatsConfig{Counter: "bytes_in", SampleInterval: -time.Second}.Validate(), "negative")
}

func TestHAProxyStatsRatesAndResets(t *testing.T) {
	r := &scriptedStats{reads: [][]sources.ServerStat{
		{{Server: "a", SessionsTotal: 10}, {Server: "b", SessionsTotal: 100}},
		{{Server: "a", SessionsTotal: 20}, {Server: "b", SessionsTotal: 130}},
		// HAProxy restarted: b's counter went down; c is new.
		{{Server: "a", SessionsTotal: 50}, {Server: "b", SessionsTotal: 5}, {Server: "c", SessionsTotal: 7}},
	}}
	src := newStatsSource(t, "sessions_total", r)
	ctx := context.Background()

	first, err := src.Fetch(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, r.calls, "first fetch reads twice")
	require.Len(t, first, 2)
	ratio := first["b"][0].Value / first["a"][0].Value
	assert.InDelta(t, 3.0, ratio, 1e-9, "rates proportional to counter deltas")

	second, err := src.Fetch(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, r.calls, "later fetches read once")
	assert.Contains(t, second, "a")
	assert.NotContains(t, second, "b", "counter reset: no point, not a negative rate")
	assert.NotContains(t, second, "c", "new server: no previous read")
	dt := second["a"][0].Time.Sub(first["a"][0].Time).Seconds()
	assert.InDelta(t, 30.0, second["a"][0].Value*dt, 1e-6, "rate x interval = counter delta")
}

func TestHAProxyStatsGaugeAndErrors(t *testing.T) {
	r := &scriptedStats{reads: [][]sources.ServerStat{{{Server: "a", CurrentSessions: 4}}}}
	loads, err := newStatsSource(t, "current_sessions", r).Fetch(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 4.0, loads["a"][0].Value)
	assert.Equal(t, 1, r.calls, "a gauge needs one read")

	_, err = newStatsSource(t, "bytes_in", &scriptedStats{err: errors.New("boom")}).Fetch(context.Background())
	require.ErrorIs(t, err, sources.ErrUnreachable)
	_, err = newStatsSource(t, "bytes_in", &scriptedStats{reads: [][]sources.ServerStat{{}}}).Fetch(context.Background())
	require.ErrorIs(t, err, sources.ErrNoData)
}

// sink is a TCP server that reads and discards everything, counting the bytes.
type sink struct {
	l     net.Listener
	bytes atomic.Int64
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
				n, _ := io.Copy(io.Discard, c)
				s.bytes.Add(n)
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
	client, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	src, err := sources.NewHAProxyStats(sources.HAProxyStatsConfig{Counter: "bytes_in", SampleInterval: 10 * time.Millisecond}, "be", client, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	before, err := src.Fetch(ctx)
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

	after, err := src.Fetch(ctx)
	require.NoError(t, err)
	require.Len(t, after, 3)
	for i, s := range sinks {
		name := fmt.Sprintf("s%d", i+1)
		dt := after[name][0].Time.Sub(before[name][0].Time).Seconds()
		assert.InDelta(t, float64(s.bytes.Load()), after[name][0].Value*dt, 1, "%s: rate x interval = bytes received", name)
	}

	// HAProxy restarted: the counters start again from 0, below the last read.
	h.Restart()
	reset, err := src.Fetch(ctx)
	require.NoError(t, err)
	assert.Empty(t, reset, "no server has a valid point after a counter reset: %v", reset)
	again, err := src.Fetch(ctx)
	require.NoError(t, err)
	assert.Len(t, again, 3, "the read after the reset is the new base")
}

// waitStats polls until HAProxy's counters account for total bytes (the sinks
// may have read them a moment before HAProxy's counters are updated).
func waitStats(t *testing.T, ctx context.Context, c *haproxy.Client, total int) {
	t.Helper()
	var got uint64
	for ctx.Err() == nil {
		stats, err := c.Stats(ctx, "be")
		require.NoError(t, err)
		got = 0
		for _, s := range stats {
			got += s.BytesIn
		}
		if got >= uint64(total) {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	t.Fatalf("haproxy counted %d of %d bytes: %s", got, total, strings.TrimSpace(ctx.Err().Error()))
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

var _ weighter.Source = (*sources.HAProxyStats)(nil)

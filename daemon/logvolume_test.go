package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/metrics"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// noisySource gives every server a fixed base load times ±30 % of noise per
// cycle, dated by the clock, as a busy backend scraped every second looks.
type noisySource struct {
	clock Clock
	names []string
	base  []float64
	rnd   *rand.Rand
	err   error // when set, every Fetch fails with it (a dead source)
}

func newNoisySource(clock Clock, n int, seed uint64) *noisySource {
	rnd := rand.New(rand.NewPCG(seed, 1))
	s := &noisySource{clock: clock, rnd: rnd}
	for i := range n {
		s.names = append(s.names, fmt.Sprintf("s%04d", i))
		s.base = append(s.base, 50+100*rnd.Float64())
	}
	return s
}

func (s *noisySource) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	if s.err != nil {
		return nil, s.err
	}
	at := s.clock.Now()
	loads := make(weighter.Loads, len(s.names))
	for i, n := range s.names {
		loads[n] = weighter.Series{{Time: at, Value: s.base[i] * (0.7 + 0.6*s.rnd.Float64())}}
	}
	return loads, nil
}

// mapTarget is an in-memory backend of the named servers.
type mapTarget struct {
	mu      sync.Mutex
	names   []string
	weights map[string]int
}

func newMapTarget(names []string) *mapTarget {
	t := &mapTarget{names: names, weights: map[string]int{}}
	for _, n := range names {
		t.weights[n] = 100
	}
	return t
}

func (t *mapTarget) Servers(context.Context) ([]weighter.ServerState, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]weighter.ServerState, len(t.names))
	for i, n := range t.names {
		out[i] = weighter.ServerState{Name: n, Weight: t.weights[n], InitialWeight: 100, Admin: weighter.AdminReady, Operational: "up"}
	}
	return out, nil
}

func (t *mapTarget) SetWeights(_ context.Context, ch []weighter.Change) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range ch {
		t.weights[c.Server] = c.Weight
	}
	return nil
}

// logVolume runs cycles of one backend with the default policy, one
// simulated interval apart, and returns the log lines and bytes written at
// the default level (info).
func logVolume(t testing.TB, src *noisySource, clock *testenv.Clock, interval time.Duration, cycles int) (lines, size int) {
	t.Helper()
	ctl, err := weighter.NewController(weighter.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	u := &managedBackend{Backend: &weighter.Weigher{Name: "be", Source: src, Target: newMapTarget(src.names), Controller: ctl}}
	r := newRunner(u, Timing{Interval: interval, Timeout: interval, Jitter: 0.1}, clock, metrics.New(prometheus.NewRegistry()), log)
	for range cycles {
		r.step(context.Background())
		clock.Advance(interval)
	}
	return bytes.Count(buf.Bytes(), []byte("\n")), buf.Len()
}

// TestLogVolume measures what the daemon logs at the default level in two
// cases an operator keeps for months: a 1,000-server backend with noisy loads
// at interval 1s, and a 4-server backend whose source is dead. It prints the
// figures per hour (the README's log section quotes them) and bounds them.
func TestLogVolume(t *testing.T) {
	const interval = time.Second
	perHour := func(n, cycles int) int { return n * int(time.Hour/interval) / cycles }

	clock := testenv.NewClock()
	const busyCycles = 600
	lines, size := logVolume(t, newNoisySource(clock, 1000, 1), clock, interval, busyCycles)
	t.Logf("1,000 servers, noisy loads, interval 1s: %d lines, %d bytes in %d cycles; per hour %d lines, %d bytes",
		lines, size, busyCycles, perHour(lines, busyCycles), perHour(size, busyCycles))
	if lines > busyCycles+10 {
		t.Errorf("1,000-server backend: %d lines in %d cycles, want at most one per cycle (and a few state changes)", lines, busyCycles)
	}

	clock = testenv.NewClock()
	dead := newNoisySource(clock, 4, 2)
	dead.err = errors.New(`prometheus http://prom:9090 query "rate(x[1m])": dial tcp 10.0.0.9:9090: connect: connection refused`)
	const deadCycles = 3600
	lines, size = logVolume(t, dead, clock, interval, deadCycles)
	t.Logf("4 servers, dead source, interval 1s: %d lines, %d bytes in %d cycles; per hour %d lines, %d bytes",
		lines, size, deadCycles, perHour(lines, deadCycles), perHour(size, deadCycles))
	// One line when it starts failing, one at the 10th cycle, then one every
	// 10 minutes: 1 + 1 + 6 in the hour (one more at the edge is fine).
	if lines > 10 {
		t.Errorf("dead source: %d lines in %d cycles, want one when it fails and a summary every 10 minutes", lines, deadCycles)
	}
}

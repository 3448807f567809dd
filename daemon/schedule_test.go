package daemon

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// steppingClock is a fake clock whose After moves time on by the wait and
// fires at once: the runner's loop runs as fast as the test lets it, with
// the times it would have seen.
type steppingClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppingClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *steppingClock) After(d time.Duration) <-chan time.Time {
	c.advance(d)
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// hangingSource records when each fetch starts and then hangs: on a fake
// clock it moves the clock on by hang, on the real one it blocks until the
// cycle's deadline. After cycles fetches it ends the test's loop.
type hangingSource struct {
	clock  Clock
	hang   time.Duration // fake clock: how long each fetch takes
	cycles int
	stop   context.CancelFunc

	mu     sync.Mutex
	starts []time.Time
}

func (s *hangingSource) Fetch(ctx context.Context, _ []weighter.ServerState) (weighter.Loads, error) {
	s.mu.Lock()
	s.starts = append(s.starts, s.clock.Now())
	if len(s.starts) == s.cycles {
		s.stop()
	}
	s.mu.Unlock()
	if c, ok := s.clock.(*steppingClock); ok {
		c.advance(s.hang)
		return nil, context.DeadlineExceeded
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *hangingSource) recorded() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.starts...)
}

// runHanging runs a runner over src until src has seen its cycles.
func runHanging(t *testing.T, src *hangingSource, timing Timing) []time.Time {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src.stop = cancel
	ctl, err := weighter.NewController(weighter.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	u := &managedBackend{Backend: &weighter.Weigher{Name: "be", Source: src, Target: newMapTarget([]string{"s1", "s2"}), Controller: ctl}}
	r := newRunner(u, timing, src.clock, nil, slog.New(slog.DiscardHandler))
	r.rand = func() float64 { return 0.5 } // no jitter
	// Only stop ends the loop: the cycle the last fetch is in ends as it would.
	r.run(context.Background(), ctx)
	return src.recorded()
}

// TestCyclesStartOnSchedule: a source that hangs until the cycle's deadline
// must not stretch the period to interval + timeout; cycles start one
// interval apart, start to start.
func TestCyclesStartOnSchedule(t *testing.T) {
	clock := &steppingClock{now: time.Unix(1_800_000_000, 0)}
	src := &hangingSource{clock: clock, hang: 1450 * time.Millisecond, cycles: 5}
	starts := runHanging(t, src, Timing{Interval: 2 * time.Second, Timeout: 1500 * time.Millisecond, Jitter: 0.1})
	for i, s := range starts {
		if got, want := s.Sub(starts[0]), time.Duration(i)*2*time.Second; got != want {
			t.Errorf("cycle %d started %s after the first, want %s (all starts: %v)", i, got, want, starts)
		}
	}
}

// TestLateCycleSkipsMissedTicks: a cycle that outlasts its interval (timeout
// above the interval) makes the next start at the next tick still ahead,
// not at once: no burst of late cycles against a struggling source.
func TestLateCycleSkipsMissedTicks(t *testing.T) {
	clock := &steppingClock{now: time.Unix(1_800_000_000, 0)}
	src := &hangingSource{clock: clock, hang: 5 * time.Second, cycles: 4}
	starts := runHanging(t, src, Timing{Interval: 2 * time.Second, Timeout: 6 * time.Second})
	for i, s := range starts {
		if got, want := s.Sub(starts[0]), time.Duration(i)*6*time.Second; got != want {
			t.Errorf("cycle %d started %s after the first, want %s (ticks at 2s and 4s skipped; all starts: %v)", i, got, want, starts)
		}
	}
}

// TestCyclesStartOnScheduleRealClock is TestCyclesStartOnSchedule with a
// source that really blocks until its deadline. The bound is loose (a shared
// machine delays goroutines), but far from interval + timeout.
func TestCyclesStartOnScheduleRealClock(t *testing.T) {
	const interval, timeout = 300 * time.Millisecond, 250 * time.Millisecond
	src := &hangingSource{clock: realClock{}, cycles: 6}
	starts := runHanging(t, src, Timing{Interval: interval, Timeout: timeout})
	period := starts[len(starts)-1].Sub(starts[0]) / time.Duration(len(starts)-1)
	// Fixed schedule: 300 ms. Stretched by the hang (4/5 of the timeout): about 500 ms.
	if period < interval-20*time.Millisecond || period > interval+80*time.Millisecond {
		t.Errorf("mean period %s, want about the %s interval (starts %v)", period, interval, starts)
	}
}

// TestReloadedRunnerKeepsTheSchedule: the runner a reload starts for a
// backend that cycled waits for an interval after that cycle's start before
// its first; each reload used to cycle at once, so a burst of SIGHUPs ran a
// burst of cycles. A backend that never cycled cycles at once.
func TestReloadedRunnerKeepsTheSchedule(t *testing.T) {
	f := newFixture(t)
	f.r.rand = func() float64 { return 0.5 } // no jitter: 10 s
	f.r.step(context.Background())
	f.clock.Advance(3 * time.Second)

	next := newFixture(t)
	next.r.clock, next.r.rand = f.clock, f.r.rand
	next.r.inheritSchedule(f.r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { next.r.run(ctx, ctx); close(done) }()
	if d := <-f.clock.Waits(); d != 7*time.Second {
		t.Errorf("the reloaded runner's first wait %s, want the 7 s left of the interval since the last cycle", d)
	}
	cancel()
	<-done
	if calls := next.src.calls; calls != 0 {
		t.Errorf("%d cycles before the interval since the last one had passed", calls)
	}

	never := newFixture(t)
	never.r.inheritSchedule(newFixture(t).r)
	never.r.mu.Lock()
	first := never.r.firstAt
	never.r.mu.Unlock()
	if !first.IsZero() {
		t.Errorf("a backend that never cycled waits until %v for its first cycle, want at once", first)
	}
}

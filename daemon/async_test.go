package daemon

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// slowSource answers after its gate opens, with the number of the fetch as
// the load, or with err; it counts fetches running at once.
type slowSource struct {
	gate    chan struct{}
	calls   atomic.Int32
	running atomic.Int32
	most    atomic.Int32
	mu      sync.Mutex
	err     error
}

func (s *slowSource) Fetch(ctx context.Context, _ []weighter.ServerState) (weighter.Loads, error) {
	n := s.calls.Add(1)
	r := s.running.Add(1)
	defer s.running.Add(-1)
	for m := s.most.Load(); r > m && !s.most.CompareAndSwap(m, r); m = s.most.Load() {
	}
	select {
	case <-s.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	return weighter.Loads{"s1": {{Time: time.Unix(int64(n), 0), Value: float64(n)}}}, nil
}

// TestAsyncSourceOutlastsTheCycle: a source slower than the cycle's deadline
// still delivers. The first cycle gives up at its deadline while the fetch
// goes on in the background; the next cycle gets that fetch's answer at once
// and starts the next fetch; never two at a time; an error is reported by
// the cycle after it, and the answer after that replaces it.
func TestAsyncSourceOutlastsTheCycle(t *testing.T) {
	src := &slowSource{gate: make(chan struct{})}
	a := newAsyncSource(src, time.Minute)

	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := a.Fetch(short, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing has come back yet")
	// The fetch runs in the background: wait until it has reached the source
	// (under load the goroutine may not have run yet when the cycle gives up).
	require.Eventually(t, func() bool { return src.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	_, err = a.Fetch(short, nil) // a second cycle while the first fetch runs
	require.Error(t, err)
	assert.EqualValues(t, 1, src.calls.Load(), "one fetch at a time")

	src.gate <- struct{}{} // the first fetch answers
	loads, err := a.Fetch(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, 1.0, loads["s1"][0].Value, "the answer of the fetch that outlasted the cycle")
	require.Eventually(t, func() bool {
		l, err := a.Fetch(context.Background(), nil) // answers at once, and starts the next fetch
		return err == nil && l["s1"][0].Value == 1 && src.calls.Load() == 2
	}, 5*time.Second, time.Millisecond, "a cycle starts the next fetch")

	src.mu.Lock()
	src.err = errors.New("graphite: 503")
	src.mu.Unlock()
	src.gate <- struct{}{} // the second fetch fails
	require.Eventually(t, func() bool {
		_, err := a.Fetch(context.Background(), nil)
		return err != nil
	}, 5*time.Second, time.Millisecond)
	_, err = a.Fetch(context.Background(), nil)
	require.ErrorContains(t, err, "graphite: 503")

	src.mu.Lock()
	src.err = nil
	src.mu.Unlock()
	close(src.gate) // every later fetch answers at once
	require.Eventually(t, func() bool {
		l, err := a.Fetch(context.Background(), nil)
		return err == nil && l["s1"][0].Value >= 3
	}, 5*time.Second, time.Millisecond)
	assert.EqualValues(t, 1, src.most.Load(), "never two fetches at a time")
}

// TestAsyncSourceBoundsTheFetch: a fetch that never answers is cut by the
// wrapper's own timeout, and the next one starts.
func TestAsyncSourceBoundsTheFetch(t *testing.T) {
	src := &slowSource{gate: make(chan struct{})} // never opened
	a := newAsyncSource(src, 30*time.Millisecond)
	_, err := a.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the wrapper's timeout, not the caller's")
	_, _ = a.Fetch(context.Background(), nil)
	require.Eventually(t, func() bool { return src.calls.Load() >= 2 }, 5*time.Second, time.Millisecond)
}

// While the source's loads weigh (fast signal idle or dead), every cycle
// asks; the source itself is asked once per refresh, and each cycle gets the
// newest answer, an error included, as soon as it has come back.
func TestAsyncSourceAsksOncePerRefresh(t *testing.T) {
	open := make(chan struct{})
	close(open)
	src := &slowSource{gate: open}
	now := time.Unix(1_800_000_000, 0)
	a := newAsyncSource(src, time.Minute)
	a.every, a.now = 15*time.Second, func() time.Time { return now }
	ctx := context.Background()
	settled := func() bool { // the fetch in flight, if any, has ended
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.running == nil
	}
	for range 60 { // a minute of 1 s cycles
		_, err := a.Fetch(ctx, nil)
		require.NoError(t, err)
		testenv.WaitFor(t, "the fetch to end", settled)
		now = now.Add(time.Second)
	}
	assert.Equal(t, int32(5), src.calls.Load(), "at 0, 14, 28, 42 and 56 s (a tenth of slack)")

	src.mu.Lock()
	src.err = errors.New("prometheus: connection refused")
	src.mu.Unlock()
	now = now.Add(15 * time.Second)
	_, _ = a.Fetch(ctx, nil) // starts the failing fetch (the answer is the last one, or the error if it is back already)
	testenv.WaitFor(t, "the failing fetch to end", settled)
	now = now.Add(time.Second)
	_, err := a.Fetch(ctx, nil) // the next cycle: the error, without a new fetch
	require.ErrorContains(t, err, "connection refused")
	assert.Equal(t, int32(6), src.calls.Load())
}

package fastsignal

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
// goes on in the background; the next cycle takes that fetch's answer at
// once, and the answer is handed over once (the Fresh keeps it, not the
// wrapper); never two fetches at a time; an error is an answer like another.
func TestAsyncSourceOutlastsTheCycle(t *testing.T) {
	src := &slowSource{gate: make(chan struct{})}
	a := newAsyncSource(src, time.Minute)

	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	a.Start(nil)
	_, ok, err := a.Take(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing has come back yet")
	require.False(t, ok)
	// The fetch runs in the background: wait until it has reached the source
	// (under load the goroutine may not have run yet when the cycle gives up).
	require.Eventually(t, func() bool { return src.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	a.Start(nil) // a second cycle while the first fetch runs
	_, _, err = a.Take(short)
	require.Error(t, err)
	assert.EqualValues(t, 1, src.calls.Load(), "one fetch at a time")

	src.gate <- struct{}{} // the first fetch answers
	got, ok, err := a.Take(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, got.Err)
	assert.Equal(t, 1.0, got.Loads["s1"][0].Value, "the answer of the fetch that outlasted the cycle")
	_, ok, err = a.Take(context.Background())
	require.NoError(t, err)
	assert.False(t, ok, "handed over once: the wrapper keeps no copy")

	src.mu.Lock()
	src.err = errors.New("graphite: 503")
	src.mu.Unlock()
	a.Start(nil)
	src.gate <- struct{}{} // the second fetch fails
	require.Eventually(t, func() bool {
		got, ok, _ = a.Take(context.Background())
		return ok
	}, 5*time.Second, time.Millisecond)
	require.ErrorContains(t, got.Err, "graphite: 503")

	src.mu.Lock()
	src.err = nil
	src.mu.Unlock()
	close(src.gate) // every later fetch answers at once
	a.Start(nil)
	require.Eventually(t, func() bool {
		got, ok, _ = a.Take(context.Background())
		return ok
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, got.Err)
	assert.Equal(t, 3.0, got.Loads["s1"][0].Value)
	assert.EqualValues(t, 1, src.most.Load(), "never two fetches at a time")
}

// TestAsyncSourceBoundsTheFetch: a fetch that never answers is cut by the
// wrapper's own timeout, which is its answer, and the next one starts.
func TestAsyncSourceBoundsTheFetch(t *testing.T) {
	src := &slowSource{gate: make(chan struct{})} // never opened
	a := newAsyncSource(src, 30*time.Millisecond)
	a.Start(nil)
	got, ok, err := a.Take(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
	require.ErrorIs(t, got.Err, context.DeadlineExceeded, "the wrapper's timeout, not the caller's")
	a.Start(nil)
	require.Eventually(t, func() bool { return src.calls.Load() >= 2 }, 5*time.Second, time.Millisecond)
}

// The wrapper keeps no clock: each Start starts a fetch unless one runs
// (when is the Fresh's refresh, weighter.TestFreshStartsABackgroundSourceOncePerRefresh).
func TestAsyncSourceStartsWhenTold(t *testing.T) {
	open := make(chan struct{})
	close(open)
	src := &slowSource{gate: open}
	a := newAsyncSource(src, time.Minute)
	for i := range 3 {
		a.Start(nil)
		testenv.WaitFor(t, "the fetch's answer", func() bool {
			_, ok, err := a.Take(context.Background())
			require.NoError(t, err)
			return ok
		})
		assert.EqualValues(t, i+1, src.calls.Load())
	}
}

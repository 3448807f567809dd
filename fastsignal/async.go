package fastsignal

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// asyncSource fetches a remote metrics source in the background, one fetch at
// a time, each bounded by its own timeout (a weighter.BackgroundSource): the
// Fresh source starts a fetch when its schedule says and takes the answer
// in a later cycle, without waiting for it (but for the first).
//
// Why: with the fast signal the cycle is 2 s and the source gets 4/5 of it,
// so a source that takes longer to answer (a Graphite across the internet,
// a heavy PromQL query) would time out every time and never calibrate. Its
// points are 15-60 s old anyway and the calibration averages them over
// minutes: one more refresh of age costs nothing, a source that never
// arrives costs the calibration.
//
// It keeps no schedule (the Fresh's refresh is the one) and no cache: an
// answer waits here only until it is taken.
type asyncSource struct {
	src     weighter.Source
	timeout time.Duration

	mu      sync.Mutex
	ready   *weighter.Answer // an answer not taken yet
	taken   bool             // an answer has been taken
	running chan struct{}    // closed when the fetch in flight ends; nil when none runs
}

var _ weighter.BackgroundSource = (*asyncSource)(nil)

func newAsyncSource(src weighter.Source, timeout time.Duration) *asyncSource {
	return &asyncSource{src: src, timeout: timeout}
}

// Fetch fetches the source in the caller's time, as if it were not wrapped.
func (a *asyncSource) Fetch(ctx context.Context, servers []weighter.ServerState) (weighter.Loads, error) {
	return a.src.Fetch(ctx, servers)
}

// Start starts a background fetch of servers unless one is running.
func (a *asyncSource) Start(servers []weighter.ServerState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running == nil {
		a.running = make(chan struct{})
		go a.fetch(a.running, servers)
	}
}

// Take hands over the answer of a fetch that ended since the last Take.
// Until one has been taken it waits for the fetch in flight, as long as ctx
// allows.
func (a *asyncSource) Take(ctx context.Context) (weighter.Answer, bool, error) {
	a.mu.Lock()
	running, first := a.running, !a.taken && a.ready == nil
	a.mu.Unlock()
	if first && running != nil {
		select {
		case <-running:
		case <-ctx.Done():
			return weighter.Answer{}, false, fmt.Errorf("no answer from the source yet (it goes on in the background, for up to %s): %w",
				a.timeout, ctx.Err())
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	got := a.ready
	if got == nil {
		return weighter.Answer{}, false, nil
	}
	a.ready, a.taken = nil, true
	return *got, true, nil
}

// fetch runs one fetch under the wrapper's own timeout: the cycle that
// started it may have ended long before.
func (a *asyncSource) fetch(done chan struct{}, servers []weighter.ServerState) {
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	loads, err := a.src.Fetch(ctx, servers)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ready, a.running = &weighter.Answer{Loads: loads, Err: err}, nil
	close(done)
}

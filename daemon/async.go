package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// asyncSource fetches a remote metrics source in the background, one fetch at
// a time, each bounded by its own timeout, and answers every Fetch at once
// with the newest completed result (after the first, which it waits for
// within the caller's deadline).
//
// Why: with the fast signal the cycle is 2 s and the source gets 4/5 of it,
// so a source that takes longer to answer (a Graphite across the internet,
// a heavy PromQL query) would time out every time and never calibrate. Its
// points are 15-60 s old anyway and the calibration averages them over
// minutes: one more refresh of age costs nothing, a source that never
// arrives costs the calibration.
//
// It also starts a fetch no more often than every: while the fast signal is
// idle or dead the source's loads weigh and every cycle asks for them, but a
// metrics source's data changes no faster than its refresh (15 s); each
// cycle still gets the newest answer as soon as it has come back.
type asyncSource struct {
	src     weighter.Source
	timeout time.Duration
	every   time.Duration    // 0: a fetch whenever none runs
	now     func() time.Time // nil: time.Now

	mu      sync.Mutex
	loads   weighter.Loads
	err     error
	have    bool          // a fetch has completed
	running chan struct{} // closed when the fetch in flight ends; nil when none runs
	started time.Time     // when the last fetch started
}

func newAsyncSource(src weighter.Source, timeout time.Duration) *asyncSource {
	return &asyncSource{src: src, timeout: timeout}
}

// Fetch starts a background fetch unless one is running and returns the
// newest completed result. Before the first result it waits for it, as long
// as ctx allows.
func (a *asyncSource) Fetch(ctx context.Context, servers []weighter.ServerState) (weighter.Loads, error) {
	a.mu.Lock()
	now := time.Now()
	if a.now != nil {
		now = a.now()
	}
	// A tenth of slack: the Fresh asks on its own clock every refresh, and
	// must not find the next fetch a hair too early and wait another refresh.
	if a.running == nil && (!a.have || now.Sub(a.started) >= a.every-a.every/10) {
		a.running, a.started = make(chan struct{}), now
		go a.fetch(a.running, servers)
	}
	running, have := a.running, a.have
	a.mu.Unlock()
	if !have {
		select {
		case <-running:
		case <-ctx.Done():
			return nil, fmt.Errorf("no answer from the source yet (it goes on in the background, for up to %s): %w",
				a.timeout, ctx.Err())
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.loads, a.err
}

func (a *asyncSource) fetch(done chan struct{}, servers []weighter.ServerState) {
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	loads, err := a.src.Fetch(ctx, servers)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.loads, a.err, a.have, a.running = loads, err, true, nil
	close(done)
}

package daemon

import (
	"context"
	"sync"
	"time"
)

// group is the set of runners of one configuration.
type group struct {
	units   []*managedBackend
	runners []*runner
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	wait    time.Duration // how long stop waits for the runners
}

// stop stops the runners, waits for the cycles in flight (cancelled only
// when the daemon's context ended: shutdown), and closes the units. A runner
// still busy after g.wait has a source or target that ignores its timeout:
// stop logs it, leaves it (and its unit) alone and returns its backend, so
// that neither shutdown (and restore_on_exit) nor a reload hangs on it.
func (g *group) stop() (stuck []string) {
	g.cancel()
	ended := make(chan struct{})
	go func() { g.wg.Wait(); close(ended) }()
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	select {
	case <-ended:
	case <-timer.C:
	}
	for _, r := range g.runners {
		select {
		case <-r.done:
			r.unit.Close()
		default:
			r.log.Error("backend loop did not stop in time", "waited", g.wait,
				"reason", "its source or target ignores the cycle timeout", "next", "going on without it")
			stuck = append(stuck, r.unit.Backend.Name)
		}
	}
	return stuck
}

// runner returns the runner of the named backend, or nil.
func (g *group) runner(backend string) *runner {
	for _, r := range g.runners {
		if r.unit.Backend.Name == backend {
			return r
		}
	}
	return nil
}

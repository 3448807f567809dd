package metrics

import "sync"

// watched is where a collector gets its state at each scrape, from the
// daemon's configuration in force: what a reload removes (a socket, a
// backend, a server) is gone from the next scrape, where a gauge set per
// cycle would keep its series.
type watched[T any] struct {
	mu    sync.Mutex
	state func() []T
}

// watch makes get return what state returns.
func (w *watched[T]) watch(state func() []T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.state = state
}

// get is the state now, nil before watch.
func (w *watched[T]) get() []T {
	w.mu.Lock()
	state := w.state
	w.mu.Unlock()
	if state == nil {
		return nil
	}
	return state()
}

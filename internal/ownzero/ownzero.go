// Package ownzero records which weight-0 drains a process made itself, so a
// writer can tell them from a drain someone else made (an operator's `set
// weight 0`, keepalived's inhibit_on_failure) and never undo the latter.
//
// A record is kept for the whole process, not per connection or target: a
// reload builds new targets while the old one restores or the controller
// goes on resuming what it drained.
package ownzero

import "sync"

// Record remembers, per key (a server of a backend, a destination of a
// service), whether the newest weight acknowledged to this process was 0.
//
// A read that sees the key at a non-zero weight ends the record (a restart
// put it back), but only a read sent after the 0 was acknowledged: one sent
// before it and answered after (another goroutine's read of the same target)
// saw the weight from before the drain.
type Record[K comparable] struct {
	mu    sync.Mutex
	clock uint64       // advances at every write acknowledged and read sent
	set   map[K]uint64 // the clock when the 0 was acknowledged
}

// ReadSent returns the token of a read about to be sent, for Seen.
func (r *Record[K]) ReadSent() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock++
	return r.clock
}

// Wrote records a weight acknowledged to this process.
func (r *Record[K]) Wrote(k K, weight int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if weight != 0 {
		delete(r.set, k)
		return
	}
	if r.set == nil {
		r.set = map[K]uint64{}
	}
	r.clock++
	r.set[k] = r.clock
}

// Seen ends the record of a key that the read with token sent saw at a
// non-zero weight, if that read was sent after the 0 was acknowledged.
func (r *Record[K]) Seen(k K, sent uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at, ok := r.set[k]; ok && at < sent {
		delete(r.set, k)
	}
}

// Ours reports whether the newest weight acknowledged to this process for k
// was 0.
func (r *Record[K]) Ours(k K) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.set[k]
	return ok
}

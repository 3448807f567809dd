// Package ownzero records which weight-0 drains a process made itself, so a
// writer can tell them from a drain someone else made (an operator's `set
// weight 0`, keepalived's inhibit_on_failure) and never undo the latter.
//
// One record serves the whole process, not one per connection or target: a
// reload builds new targets while the old one restores or the controller
// goes on resuming what it drained. It is a value its owner (the daemon)
// makes once and hands to every writer it builds, not a package variable:
// two daemons in one process (tests) or a writer built alone (a tool, once)
// each have their own.
package ownzero

import "sync"

// Key names one server of one target.
type Key struct {
	// Target is what the writer talks to: an HAProxy runtime socket, or
	// "ipvs" for the kernel's IP Virtual Server table.
	Target string
	// Group is the HAProxy backend, or the IPVS virtual service.
	Group string
	// Server is the HAProxy server's name, or the IPVS destination's address.
	Server string
}

// Record remembers, per key (a server of a backend, a destination of a
// service), whether the newest weight acknowledged to this process was 0.
// The zero value is an empty record.
//
// A read that sees the key at a non-zero weight ends the record (a restart
// put it back), but only a read sent after the 0 was acknowledged: one sent
// before it and answered after (another goroutine's read of the same target)
// saw the weight from before the drain.
type Record struct {
	mu    sync.Mutex
	clock uint64         // advances at every write acknowledged and read sent
	set   map[Key]uint64 // the clock when the 0 was acknowledged
}

// ReadSent returns the token of a read about to be sent, for Seen.
func (r *Record) ReadSent() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock++
	return r.clock
}

// Wrote records a weight acknowledged to this process.
func (r *Record) Wrote(k Key, weight int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if weight != 0 {
		delete(r.set, k)
		return
	}
	if r.set == nil {
		r.set = map[Key]uint64{}
	}
	r.clock++
	r.set[k] = r.clock
}

// Seen ends the record of a key that the read with token sent saw at a
// non-zero weight, if that read was sent after the 0 was acknowledged.
func (r *Record) Seen(k Key, sent uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at, ok := r.set[k]; ok && at < sent {
		delete(r.set, k)
	}
}

// Ours reports whether the newest weight acknowledged to this process for k
// was 0.
func (r *Record) Ours(k Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.set[k]
	return ok
}

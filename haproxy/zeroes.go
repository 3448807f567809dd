package haproxy

import "sync"

// zeroes remembers, per socket, backend and server, whether the newest weight
// HAProxy acknowledged to this process was 0: a drain the daemon made.
// Restore tells it from an operator's drain by weight 0 with it. It is kept
// for the whole process, not per Client or Backend: a reload builds new
// Backends (and a new Client when the socket's settings change) while the
// Backend that took the Snapshot does the Restore.
//
// A read that sees the server at a non-zero weight ends the record (an
// HAProxy restart put it back), but only a read sent after the 0 was
// acknowledged: one sent before it and answered after (another goroutine's
// read of the same backend) saw the weight from before the drain.
type zeroes struct {
	mu    sync.Mutex
	clock uint64               // advances at every write acknowledged and read sent
	set   map[[3]string]uint64 // the clock when the 0 was acknowledged
}

// daemonZeroes is every Client's record.
var daemonZeroes zeroes

// readSent returns the token of a read about to be sent, for seen.
func (z *zeroes) readSent() uint64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.clock++
	return z.clock
}

// wrote records a weight HAProxy acknowledged to this process.
func (z *zeroes) wrote(socket, backend, server string, weight int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	key := [3]string{socket, backend, server}
	if weight != 0 {
		delete(z.set, key)
		return
	}
	if z.set == nil {
		z.set = map[[3]string]uint64{}
	}
	z.clock++
	z.set[key] = z.clock
}

// seen ends the record of a server that the read with token sent saw at a
// non-zero weight, if that read was sent after the 0 was acknowledged.
func (z *zeroes) seen(socket, backend, server string, sent uint64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	key := [3]string{socket, backend, server}
	if at, ok := z.set[key]; ok && at < sent {
		delete(z.set, key)
	}
}

// daemons reports whether the newest weight HAProxy acknowledged to this
// process for the server was 0.
func (z *zeroes) daemons(socket, backend, server string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	_, ok := z.set[[3]string{socket, backend, server}]
	return ok
}

package haproxy

import "sync"

// zeroes remembers, per socket, backend and server, whether the newest weight
// HAProxy acknowledged to this process was 0: a drain the daemon made.
// Restore tells it from an operator's drain by weight 0 with it. It is kept
// for the whole process, not per Client or Backend: a reload builds new
// Backends (and a new Client when the socket's settings change) while the
// Backend that took the Snapshot does the Restore.
type zeroes struct {
	mu  sync.Mutex
	set map[[3]string]bool
}

// daemonZeroes is every Client's record.
var daemonZeroes zeroes

func (z *zeroes) note(socket, backend, server string, weight int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	key := [3]string{socket, backend, server}
	if weight != 0 {
		delete(z.set, key)
		return
	}
	if z.set == nil {
		z.set = map[[3]string]bool{}
	}
	z.set[key] = true
}

func (z *zeroes) wrote(socket, backend, server string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.set[[3]string{socket, backend, server}]
}

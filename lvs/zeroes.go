package lvs

import (
	"net/netip"
	"sync"
)

// ownZeroes remembers, per service and destination, whether the newest
// weight this process wrote was 0: a quiesce the daemon made. Any other
// weight 0 is someone else's (keepalived's inhibit_on_failure, an operator)
// and SetWeights does not write over it. It is kept for the whole process,
// not per Service: a reload builds a new Service while the controller goes
// on resuming what it drained.
var ownZeroes = struct {
	mu  sync.Mutex
	set map[zeroKey]bool
}{set: map[zeroKey]bool{}}

type zeroKey struct {
	service string
	addr    netip.AddrPort
}

func noteWritten(service string, addr netip.AddrPort, weight int) {
	ownZeroes.mu.Lock()
	defer ownZeroes.mu.Unlock()
	if weight == 0 {
		ownZeroes.set[zeroKey{service, addr}] = true
	} else {
		delete(ownZeroes.set, zeroKey{service, addr})
	}
}

func zeroedByUs(service string, addr netip.AddrPort) bool {
	ownZeroes.mu.Lock()
	defer ownZeroes.mu.Unlock()
	return ownZeroes.set[zeroKey{service, addr}]
}

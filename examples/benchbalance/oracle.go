package main

import "sync"

// oracle places each new connection on the server with the least true load: the sum of
// the rates of the connections it placed there that are still open. It knows every
// connection's rate when it opens, which no balancer does: the best any placement-only
// method can do (as the simulator's oracle).
type oracle struct {
	mu    sync.Mutex
	addrs []string  // where a connection to server i goes
	load  []float64 // true load of server i, bytes/s
}

func newOracle(addrs []string) *oracle {
	return &oracle{addrs: addrs, load: make([]float64, len(addrs))}
}

// place picks the server for a connection of rate bytes/s; release ends its load.
func (o *oracle) place(rate float64) (string, func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	best := 0
	for i, l := range o.load {
		if l < o.load[best] {
			best = i
		}
	}
	o.load[best] += rate
	var once sync.Once
	return o.addrs[best], func() {
		once.Do(func() {
			o.mu.Lock()
			o.load[best] -= rate
			o.mu.Unlock()
		})
	}
}

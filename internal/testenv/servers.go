package testenv

import "github.com/haproxy-weighter/haproxy-weighter/weighter"

// Servers are servers by these names and nothing else (no address, weight
// or state): what a source or a fast reader is handed by a test that does
// not read a target.
func Servers(names ...string) []weighter.ServerState {
	out := make([]weighter.ServerState, len(names))
	for i, n := range names {
		out[i] = weighter.ServerState{Name: n}
	}
	return out
}

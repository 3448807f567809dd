package weighter

import (
	"slices"
	"strings"
)

// memory is what a Controller remembers of one server between cycles. It is
// kept small: every cycle reads it for every server.
type memory struct {
	written int // last weight we wrote (from Commit); -1 = never
	// sent is a weight sent in a batch whose replies were lost (from Sent);
	// -1 = none. The next Plan settles it: found at that weight, it was
	// applied and becomes written; else it was not, and is dropped.
	sent    int
	drained bool // we drained it and it has not resumed
	// history is the state of the optional policies (smoothing,
	// connection_life); nil until one of them stores something.
	history *history
}

// history is a server's state for smoothing and connection_life.
type history struct {
	smooth   ewmaState       // EWMA of the load; smooth.at is zero before the first value
	sessions []sessionSample // session counts read at each cycle
}

func newMemory() memory { return memory{written: -1, sent: -1} }

// hist returns m's history, creating it on first use.
func (m *memory) hist() *history {
	if m.history == nil {
		m.history = &history{}
	}
	return m.history
}

// roster is the server list of the last cycle and the memory of each server,
// kept in name order. Targets list their servers in the same order every
// cycle, so a cycle only compares the names with the last list (one linear
// pass) and then finds every server's memory by position: with 10,000 servers,
// a map lookup per server and per kind of state cost more than the rest of
// the plan.
type roster struct {
	names  []string // the servers' names in the caller's order, last cycle
	order  []int    // indexes into the caller's servers, sorted by name
	sorted []string // the names sorted; sorted[i] is the server of mems[i]
	mems   []memory // aligned with sorted
	// orphans are weights committed for servers that were not in the last
	// list (a Commit before the first Plan, or carried over by a reload).
	// The next cycle that lists them takes them over; the others are dropped.
	orphans map[string]int
}

// align makes the roster describe servers: order sorts them by name and mems[i]
// is the memory of the i-th server by name. Memory of servers that left is
// dropped, so a server of the same name that comes back later starts fresh.
func (r *roster) align(servers []ServerState) {
	if sameNames(r.names, servers) && len(r.orphans) == 0 {
		return
	}
	r.names, r.order = r.names[:0], r.order[:0]
	for i := range servers {
		r.names, r.order = append(r.names, servers[i].Name), append(r.order, i)
	}
	byName := func(i, j int) int { return strings.Compare(servers[i].Name, servers[j].Name) }
	if !slices.IsSortedFunc(r.order, byName) {
		slices.SortStableFunc(r.order, byName)
	}
	sorted := make([]string, len(servers))
	mems := make([]memory, len(servers))
	old := 0
	for k, i := range r.order {
		name := servers[i].Name
		sorted[k], mems[k] = name, newMemory()
		// both lists are sorted: walk the old one along (a merge join)
		for old < len(r.sorted) && r.sorted[old] < name {
			old++
		}
		if old < len(r.sorted) && r.sorted[old] == name {
			mems[k] = r.mems[old]
			old++ // a duplicate name gets fresh memory rather than a shared one
		}
		if w, ok := r.orphans[name]; ok {
			mems[k].written = w
		}
	}
	r.sorted, r.mems, r.orphans = sorted, mems, nil
}

// sameNames reports whether servers are named names, in that order.
func sameNames(names []string, servers []ServerState) bool {
	if len(names) != len(servers) {
		return false
	}
	for i := range servers {
		if servers[i].Name != names[i] {
			return false
		}
	}
	return true
}

// find returns the memory of the named server of the last list, or nil.
func (r *roster) find(name string) *memory {
	i, ok := slices.BinarySearch(r.sorted, name)
	if !ok {
		return nil
	}
	return &r.mems[i]
}

// settleSent decides a weight sent whose reply was lost, from the weight
// HAProxy holds now: at that weight, the daemon's write was applied (late,
// or its reply lost), and is its own, not a change made outside.
func (m *memory) settleSent(current int) {
	if m.sent < 0 {
		return
	}
	if current == m.sent {
		m.written = m.sent
	}
	m.sent = -1
}

// send records a weight sent whose outcome is unknown (Controller.Sent).
// A server not in the last list is left out: there is no earlier write of
// it to tell an operator's change from.
func (r *roster) send(ch Change) {
	if m := r.find(ch.Server); m != nil {
		m.sent = ch.Weight
	}
}

// commit records a written weight.
func (r *roster) commit(ch Change) {
	if m := r.find(ch.Server); m != nil {
		m.written = ch.Weight
		return
	}
	if r.orphans == nil {
		r.orphans = map[string]int{}
	}
	r.orphans[ch.Server] = ch.Weight
}

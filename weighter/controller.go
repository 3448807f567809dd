package weighter

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Controller is the policy layer of one backend. It keeps what must survive
// between cycles (the weights it wrote, which servers it drained, the smoothed
// loads) and turns the weighting function's raw output into a safe Plan.
// Its methods are safe for concurrent use.
type Controller struct {
	p  Policy
	fn Func

	mu      sync.Mutex
	written map[string]int       // last weight we wrote, by server (from Commit)
	drained map[string]bool      // servers we drained and not yet resumed
	smooth  map[string]ewmaState // per-server EWMA of the load
	newest  time.Time            // newest valid data point any earlier cycle saw
	// sessions are the session counts read at each cycle (connection_life only).
	sessions map[string][]sessionSample
	buf      buffers
}

// NewController validates p and returns a Controller with empty state.
func NewController(p Policy) (*Controller, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("invalid policy: %w", err)
	}
	return &Controller{
		p:        p,
		fn:       Functions[p.Function],
		written:  map[string]int{},
		drained:  map[string]bool{},
		smooth:   map[string]ewmaState{},
		sessions: map[string][]sessionSample{},
	}, nil
}

// Policy returns the policy the Controller was built with.
func (c *Controller) Policy() Policy { return c.p }

// Commit records the weights that were really written, so a weight changed
// behind our back (HAProxy reload, another tool) is re-applied next cycle.
func (c *Controller) Commit(written []Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range written {
		c.written[ch.Server] = ch.Weight
	}
}

// Plan computes this cycle's plan from the loads and the target's servers.
// It updates the smoothing and drain state but not what was written: call
// Commit with what the writer really wrote.
func (c *Controller) Plan(now time.Time, loads Loads, servers []ServerState) Plan {
	c.mu.Lock()
	defer c.mu.Unlock()
	plan := Plan{Time: now, Function: c.p.Function, Servers: make([]ServerPlan, len(servers))}
	// Only an integrating function needs to know whether the data advanced;
	// the scan over every series is skipped for the others.
	fresh := true
	if integrates(c.p.Function) {
		fresh = c.advance(loads)
	}
	ws, found := c.newWork(now, loads, servers, plan.Servers)
	if found < len(loads) {
		plan.Unknown = unknownServers(loads, ws)
	}
	c.classify(ws)
	n, valid := dataCount(ws)
	plan.Coverage, plan.Imbalance = coverage(n, valid), imbalance(ws)
	if reason := c.holdReason(n, valid, plan.Coverage); reason != "" {
		plan.Hold, plan.Reason = true, reason
		holdAll(ws, reason)
	} else {
		c.drain(ws)
		c.weigh(now, ws, fresh)
	}
	return plan
}

// work is one server's state while a plan is being built; the decisions go
// straight into its line of the plan.
type work struct {
	*ServerPlan
	st      *ServerState
	done    bool    // action decided
	written int     // last weight we wrote, -1 = never
	filled  float64 // load fed to the function (Load, or the mean with missing: mean)
	series  Series  // the server's load series, as given
	note    string  // context added to the reason (resumed, mean load used)
}

// newWork sorts the servers by name into out, aggregates and smooths their
// loads and looks up what we wrote. found counts the servers that have an
// entry in loads. The work slices are the Controller's, reused across cycles:
// with 10,000 servers a cycle would otherwise allocate megabytes.
func (c *Controller) newWork(now time.Time, loads Loads, servers []ServerState, out []ServerPlan) (ws []*work, found int) {
	sorted := c.sortedServers(servers)
	raw := slices.Grow(c.buf.raw[:0], len(sorted))[:len(sorted)]
	series := slices.Grow(c.buf.series[:0], len(sorted))[:len(sorted)]
	scratch := c.buf.scratch[:0]
	for i, s := range sorted {
		var ok bool
		if series[i], ok = loads[s.Name]; ok {
			found++
		}
		raw[i], scratch = aggregate(series[i], c.p.Aggregate, now, c.p.MaxAge, scratch[:0])
	}
	smoothed := c.smoothLoads(now, sorted, raw)
	c.recordSessions(now, sorted)
	arr := slices.Grow(c.buf.work[:0], len(sorted))[:len(sorted)]
	ws = slices.Grow(c.buf.ptrs[:0], len(sorted))[:len(sorted)]
	var hits stateHits
	for i, s := range sorted {
		written := hits.lookup(c, s.Name)
		out[i] = ServerPlan{Server: s.Name, Load: smoothed[i], Current: s.Weight, Raw: s.Weight, New: s.Weight}
		arr[i] = work{ServerPlan: &out[i], st: s, written: written, filled: smoothed[i], series: series[i]}
		ws[i] = &arr[i]
	}
	c.buf.sorted, c.buf.raw, c.buf.series, c.buf.scratch, c.buf.work, c.buf.ptrs = sorted, raw, series, scratch, arr, ws
	if hits.written < len(c.written) || hits.drained < len(c.drained) || hits.smooth < len(c.smooth) {
		c.prune(sorted)
	}
	return ws, found
}

// stateHits counts the servers of this cycle that have state in the
// Controller's maps: fewer than the map holds means some server left.
type stateHits struct{ written, drained, smooth int }

// lookup returns the weight we last wrote to name (-1 = never) and counts hits.
func (h *stateHits) lookup(c *Controller, name string) int {
	if len(c.drained) > 0 && c.drained[name] {
		h.drained++
	}
	if len(c.smooth) > 0 {
		if _, ok := c.smooth[name]; ok {
			h.smooth++
		}
	}
	written, ok := c.written[name]
	if !ok {
		return -1
	}
	h.written++
	return written
}

// sortedServers returns pointers to the servers, sorted by name. The caller's
// slice is not modified. Targets list their servers in the same order every
// cycle, so the order found last time is checked (a linear pass) before sorting.
func (c *Controller) sortedServers(servers []ServerState) []*ServerState {
	if !sameNames(c.buf.names, servers) {
		c.buf.names, c.buf.order = c.buf.names[:0], c.buf.order[:0]
		for i, s := range servers {
			c.buf.names, c.buf.order = append(c.buf.names, s.Name), append(c.buf.order, i)
		}
		byName := func(i, j int) int { return strings.Compare(servers[i].Name, servers[j].Name) }
		if !slices.IsSortedFunc(c.buf.order, byName) {
			slices.SortStableFunc(c.buf.order, byName)
		}
	}
	sorted := c.buf.sorted[:0]
	for _, i := range c.buf.order {
		sorted = append(sorted, &servers[i])
	}
	return sorted
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

// buffers are the per-cycle slices a Controller reuses.
type buffers struct {
	names        []string // server names in the caller's order, last cycle
	order        []int    // indexes into the caller's servers, sorted by name
	sorted       []*ServerState
	raw, scratch []float64
	series       []Series // each sorted server's series, looked up once
	work         []work
	ptrs, active []*work
	loads        []float64 // function input
	estimate     []estimateInput
	current      []int // function input
}

// unknownServers lists the names in loads that are no server of ws (sorted by name).
func unknownServers(loads Loads, ws []*work) []string {
	var out []string
	for name := range loads {
		if _, ok := slices.BinarySearchFunc(ws, name, func(w *work, n string) int { return strings.Compare(w.Server, n) }); !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// prune forgets servers that left the target, so state cannot grow without bound.
func (c *Controller) prune(sorted []*ServerState) {
	present := make(map[string]bool, len(sorted))
	for _, s := range sorted {
		present[s.Name] = true
	}
	gone := func(name string) bool { return !present[name] }
	maps.DeleteFunc(c.written, func(name string, _ int) bool { return gone(name) })
	maps.DeleteFunc(c.drained, func(name string, _ bool) bool { return gone(name) })
	maps.DeleteFunc(c.smooth, func(name string, _ ewmaState) bool { return gone(name) })
}

func (w *work) decide(a Action, newWeight int, reason string) {
	w.Action, w.New, w.Reason, w.done = a, newWeight, reason, true
}

func (w *work) weightable() bool { return !w.done }

func (w *work) valid() bool { return !math.IsNaN(w.Load) }

// advance records the time of the newest valid point in loads and reports
// whether it is newer than any point an earlier cycle saw. Trailing null points
// (Graphite returns buckets up to now) do not count: they carry no data. Points
// without a time cannot be told apart, so they always count as new.
func (c *Controller) advance(loads Loads) bool {
	var newest time.Time
	undated := false
	for _, s := range loads {
		for i := len(s) - 1; i >= 0; i-- {
			if validLoad(s[i].Value) {
				undated = undated || s[i].Time.IsZero()
				if s[i].Time.After(newest) {
					newest = s[i].Time
				}
				break
			}
		}
	}
	if undated && newest.IsZero() {
		return true
	}
	if !newest.After(c.newest) {
		return false
	}
	c.newest = newest
	return true
}

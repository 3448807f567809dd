package weighter

import (
	"fmt"
	"math"
	"slices"
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

	mu       sync.Mutex
	roster   roster      // the servers of the last cycle and their memory
	newest   time.Time   // newest valid data point any earlier cycle saw
	runs     runState    // the run bound's memory (max_run)
	settling settleState // a reset's settling: the configured weights kept while clients reconnect
	buf      buffers
}

// NewController validates p and returns a Controller with empty state.
func NewController(p Policy) (*Controller, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("invalid policy: %w", err)
	}
	return &Controller{p: p, fn: Functions[p.Function]}, nil
}

// Policy returns the policy the Controller was built with.
func (c *Controller) Policy() Policy { return c.p }

// Commit records the weights that were really written, so a weight changed
// behind our back (HAProxy reload, another tool) is re-applied next cycle.
func (c *Controller) Commit(written []Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range written {
		c.roster.commit(ch)
	}
}

// Sent records weights sent to the target whose outcome is unknown (an
// *UnconfirmedError): the next Plan takes a server it finds at such a
// weight for written by the daemon, and re-applies nothing there.
func (c *Controller) Sent(sent []Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range sent {
		c.roster.send(ch)
	}
}

// Plan computes this cycle's plan from the loads and the target's servers.
// It updates the smoothing and drain state but not what was written: call
// Commit with what the writer really wrote.
func (c *Controller) Plan(now time.Time, loads Loads, servers []ServerState) Plan {
	c.mu.Lock()
	defer c.mu.Unlock()
	plan := Plan{Time: now, Function: c.p.Function, Servers: make([]ServerPlan, len(servers)), Scale: 1}
	// Only an integrating function needs to know whether the data advanced;
	// the scan over every series is skipped for the others.
	fresh := true
	if integrates(c.p.Function) {
		fresh = c.advance(loads)
	}
	c.roster.align(servers)
	ws, found := c.newWork(now, loads, servers, plan.Servers)
	plan.Reset = c.forgetResetWeights(ws, servers)
	settling := c.settle(now, ws, plan.Reset)
	if found < len(loads) {
		plan.Unknown = unknownServers(loads, c.roster.sorted)
	}
	if c.p.MaxRun > 0 {
		c.runAllowance(ws)
	}
	st := statsOf(ws)
	plan.Coverage, plan.Imbalance = st.coverage(), st.imbalance()
	if reason := c.holdReason(st); reason != "" {
		plan.Hold, plan.Reason = true, reason
		holdAll(ws, reason)
	} else if settling != "" {
		plan.Settling = true
		keepAll(ws, settling)
	} else {
		c.drain(ws)
		plan.Scale = c.weigh(now, loads, ws, fresh)
	}
	plan.RareArrivals = c.p.MaxRun > 0 && c.runs.rank > 0 && c.runs.bounded
	return plan
}

// work is one server's state while a plan is being built; the decisions go
// straight into its line of the plan.
type work struct {
	*ServerPlan
	mem      *memory // what the Controller remembers of the server
	sessions int     // the server's open connections now
	gained   int     // connections it gained since the last cycle (the run bound's memory)
	done     bool    // action decided
	filled   float64 // load fed to the function (Load, or the mean with missing: mean)
	note     string  // context added to the reason (resumed, mean load used)
}

// newWork fills out (one line per server, sorted by name) with each server's
// aggregated and smoothed load and its current weight, and marks the servers
// that are not ours to weight. found counts the servers that have an entry in
// loads. This is the one pass that reads the caller's servers and loads (two
// with smoothing, which needs the mean of all loads first); the later passes
// read the compact work slice only. The slices are the Controller's, reused
// across cycles: with 10,000 servers a cycle would otherwise allocate megabytes.
func (c *Controller) newWork(now time.Time, loads Loads, servers []ServerState, out []ServerPlan) (ws []work, found int) {
	order, mems := c.roster.order, c.roster.mems
	ws = slices.Grow(c.buf.work[:0], len(order))[:len(order)]
	scratch := c.buf.scratch[:0]
	var raw []float64 // the loads before smoothing, when there is smoothing
	if c.p.Smoothing > 0 {
		raw = slices.Grow(c.buf.raw[:0], len(order))[:len(order)]
		c.buf.raw = raw
	}
	for k, i := range order {
		s := &servers[i]
		series, ok := loads[s.Name]
		if ok {
			found++
		}
		var load float64
		load, scratch = aggregate(series, c.p.Aggregate, now, time.Duration(c.p.MaxAge), scratch[:0])
		if raw != nil {
			raw[k] = load
		}
		out[k] = ServerPlan{Server: s.Name, Address: s.Address, Load: load, Current: s.Weight, Raw: s.Weight, New: s.Weight}
		mems[k].settleSent(s.Weight)
		ws[k] = work{ServerPlan: &out[k], mem: &mems[k], sessions: max(s.Sessions, 0), filled: load}
		c.classify(&ws[k], s)
	}
	c.buf.scratch, c.buf.work = scratch, ws
	if raw != nil {
		for k, load := range c.smoothLoads(now, raw, mems) {
			ws[k].Load, ws[k].filled = load, load
		}
	}
	if c.p.ConnectionLife > 0 {
		recordSessions(now, ws)
	}
	return ws, found
}

// buffers are the per-cycle slices a Controller reuses.
type buffers struct {
	raw, scratch []float64
	work         []work
	active, held []*work
	pinned       []bool // per active server: its share is kept (deadband)
	// shareFactor's bounds b_i/step and b_i·step, and the function's weights
	shareLo, shareHi, shareR []float64
	loads                    []float64 // function input
	exact                    []float64 // per active server, its new weight before rounding
	runR                     []float64 // the run bound's weights per connection slot
	estimate                 []estimateInput
	current                  []int // function input
}

// unknownServers lists the names in loads that are no server (sorted: the
// servers' names, sorted), sorted by name.
func unknownServers(loads Loads, sorted []string) []string {
	var out []string
	for name := range loads {
		if _, ok := slices.BinarySearch(sorted, name); !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
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

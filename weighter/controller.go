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
}

// NewController validates p and returns a Controller with empty state.
func NewController(p Policy) (*Controller, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("invalid policy: %w", err)
	}
	return &Controller{
		p:       p,
		fn:      Functions[p.Function],
		written: map[string]int{},
		drained: map[string]bool{},
		smooth:  map[string]ewmaState{},
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
	ws := c.newWork(now, loads, servers)
	plan := Plan{Time: now, Function: c.p.Function, Unknown: unknownServers(loads, ws)}
	c.prune(ws)
	c.classify(ws)
	plan.Coverage, plan.Imbalance = coverage(ws), imbalance(ws)
	if reason := c.holdReason(ws, plan.Coverage); reason != "" {
		plan.Hold, plan.Reason = true, reason
		holdAll(ws, reason)
	} else {
		c.drain(ws)
		c.weigh(ws)
	}
	plan.Servers = make([]ServerPlan, len(ws))
	for i, w := range ws {
		plan.Servers[i] = w.ServerPlan
	}
	return plan
}

// work is one server's state while a plan is being built.
type work struct {
	ServerPlan
	st      ServerState
	done    bool    // action decided
	written int     // last weight we wrote, -1 = never
	filled  float64 // load fed to the function (Load, or the mean with missing: mean)
	note    string  // context added to the reason (resumed, mean load used)
}

func (c *Controller) newWork(now time.Time, loads Loads, servers []ServerState) []*work {
	sorted := slices.Clone(servers)
	slices.SortFunc(sorted, func(a, b ServerState) int { return strings.Compare(a.Name, b.Name) })
	raw := make([]float64, len(sorted))
	for i, s := range sorted {
		raw[i] = Aggregate(loads[s.Name], c.p.Aggregate, now, c.p.MaxAge)
	}
	smoothed := c.smoothLoads(now, sorted, raw)
	ws := make([]*work, len(sorted))
	for i, s := range sorted {
		written, ok := c.written[s.Name]
		if !ok {
			written = -1
		}
		ws[i] = &work{
			ServerPlan: ServerPlan{Server: s.Name, Load: smoothed[i], Current: s.Weight, Raw: s.Weight, New: s.Weight},
			st:         s,
			written:    written,
			filled:     smoothed[i],
		}
	}
	return ws
}

func unknownServers(loads Loads, ws []*work) []string {
	known := make(map[string]bool, len(ws))
	for _, w := range ws {
		known[w.Server] = true
	}
	var out []string
	for name := range loads {
		if !known[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// prune forgets servers that left the target, so state cannot grow without bound.
func (c *Controller) prune(ws []*work) {
	present := make(map[string]bool, len(ws))
	for _, w := range ws {
		present[w.Server] = true
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

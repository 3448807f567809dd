package weighter

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Reasons of a ServerPlan that callers and tests may match on.
const (
	ReasonReapply   = "re-apply (changed outside: reload?)"
	ReasonMissing   = "missing data"
	ReasonUnchanged = "unchanged"
	ReasonRebalance = "rebalance"
	ReasonRateLimit = "rate limit (max_step)" // Raw holds what the function wanted
	ReasonDeadband  = "deadband"              // Raw holds what the function wanted
	ReasonNoNewData = "no new data point (feedback integrates each once)"
	ReasonRescale   = "rescaled with the backend"
)

// weigh runs the weighting function over the servers still undecided and turns
// its output into actions (shareOut: rate limit, deadband, re-apply). fresh says whether
// the loads hold a point no earlier cycle saw: without one, an integrating
// function keeps the weights, because integrating the same point again (a 5 s
// interval over 10 s data uses each point twice) doubles its gain every other
// cycle and makes it oscillate.
func (c *Controller) weigh(now time.Time, series Loads, ws []work, fresh bool) float64 {
	fill := math.NaN() // the mean load, computed when first needed (missing: mean)
	active, held := c.buf.active[:0], c.buf.held[:0]
	for i := range ws {
		switch w := &ws[i]; {
		case !w.weightable():
		case !w.valid() && c.p.Missing == MissingKeep:
			c.keepMissing(w)
			if w.base() > 0 {
				held = append(held, w)
			}
		default:
			if !w.valid() {
				if math.IsNaN(fill) {
					fill = statsOf(ws).mean
				}
				w.filled = fill
				w.note = fmt.Sprintf("%s: mean load %.4g used", ReasonMissing, fill)
			}
			active = append(active, w)
		}
	}
	if len(active) == 0 {
		return 1
	}
	c.buf.active, c.buf.held = active, held
	loads := slices.Grow(c.buf.loads[:0], len(active))[:len(active)]
	current := slices.Grow(c.buf.current[:0], len(active))[:len(active)]
	c.buf.loads, c.buf.current = loads, current
	for i, w := range active {
		loads[i], current[i] = w.filled, w.base()
		if current[i] <= 0 {
			current[i] = c.p.MaxWeight
		}
	}
	if !fresh && integrates(c.p.Function) {
		for _, w := range active {
			c.holdStale(w)
		}
		return 1
	}
	if c.p.ConnectionLife > 0 {
		c.estimatePerConnection(now, series, active, loads)
	}
	raw := c.fn(loads, current, c.p)
	return c.shareOut(active, held, raw)
}

// reapply reports whether the server's weight is no longer what we last wrote.
func (w *work) reapply() bool { return w.mem.written >= 0 && w.mem.written != w.Current }

// base is the weight a server's share is measured from: what we last wrote when
// the weight was changed behind our back (not the reset value), else the current one.
func (w *work) base() int {
	if w.reapply() {
		return w.mem.written
	}
	return w.Current
}

func (c *Controller) keepMissing(w *work) {
	if w.reapply() && w.mem.written > 0 {
		w.Raw = w.mem.written
		w.decide(ActionSet, w.mem.written, ReasonReapply+"; "+ReasonMissing)
		return
	}
	w.decide(ActionKeep, w.Current, ReasonMissing)
}

// holdStale keeps a server's weight when an integrating function has no new
// data; a weight changed behind our back is still set back to what we wrote.
func (c *Controller) holdStale(w *work) {
	w.Raw = w.base()
	if w.reapply() {
		w.decide(ActionSet, w.mem.written, ReasonReapply+"; "+ReasonNoNewData)
		return
	}
	w.decide(ActionKeep, w.Current, ReasonNoNewData)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

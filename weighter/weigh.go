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
// its output into actions: rate limit, deadband, re-apply. fresh says whether
// the loads hold a point no earlier cycle saw: without one, an integrating
// function keeps the weights, because integrating the same point again (a 5 s
// interval over 10 s data uses each point twice) doubles its gain every other
// cycle and makes it oscillate.
func (c *Controller) weigh(now time.Time, series Loads, ws []work, fresh bool) (scale float64) {
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
	top := 0 // the largest base weight, for the rescale
	for i, w := range active {
		loads[i], current[i] = w.filled, w.base()
		top = max(top, current[i])
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
	if len(held) > 0 {
		return c.weighBesideHeld(active, held, raw)
	}
	scale = c.rescale(top)
	for i, w := range active {
		w.Raw = raw[i]
		c.finish(w, float64(w.base())*scale)
	}
	return scale
}

// rescale is the factor that brings top, the largest base weight of the
// weighted servers, up to max_weight (1 when it is there already or above). The rate
// limit is measured from base × rescale: multiplying every weight by the same
// factor moves no traffic, and without it a backend starting from HAProxy's
// default weight 1 could only double all weights alike for 8 cycles — nothing
// would be rebalanced until the lightest server reached 256.
func (c *Controller) rescale(top int) float64 {
	if top <= 0 || top >= c.p.MaxWeight {
		return 1
	}
	return float64(c.p.MaxWeight) / float64(top)
}

// reapply reports whether the server's weight is no longer what we last wrote.
func (w *work) reapply() bool { return w.mem.written >= 0 && w.mem.written != w.Current }

// base is the weight the rate limit is measured from: what we last wrote when
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

// finish decides one weighted server: rate limit from ref, its base weight on
// the backend's scale, then deadband (which a re-apply and a move away from 0
// ignore). The deadband looks at the wanted change, not the rate-limited one:
// from weight 1 the rate limit allows only 2, and a deadband of 2 on that step
// would pin the weight at 1 forever. It compares the wanted weight with ref,
// not with the current weight: when the backend is scaled up, a server whose
// wanted weight is near its old, unscaled one has in fact lost weight.
func (c *Controller) finish(w *work, ref float64) {
	nw := c.rateLimit(w.Raw, ref)
	reason := ReasonRebalance
	if nw != w.Raw {
		reason = ReasonRateLimit
	}
	switch scaled := toWeight(ref, MaxWeight); {
	case nw == w.Current:
		w.decide(ActionKeep, nw, ReasonUnchanged)
	case w.reapply():
		w.decide(ActionSet, nw, ReasonReapply)
	case ref > 0 && abs(w.Raw-scaled) < c.p.Deadband:
		if scaled == w.Current {
			w.decide(ActionKeep, w.Current, ReasonDeadband)
		} else {
			// The whole backend is multiplied by one factor, so this
			// server must move with it or lose share; only its own
			// change (wanted vs. its weight on the new scale) is held.
			w.decide(ActionSet, scaled, rescaleReason(ref/float64(w.base()), scaled, w.Raw))
		}
	default:
		w.decide(ActionSet, nw, reason)
	}
	if w.note != "" {
		w.Reason += "; " + w.note
	}
}

// rateLimit moves from base (on the backend's scale) towards want by at most a
// factor MaxStep. From a base of 0 (drained) there is no ratio to limit, so
// want is used as is.
func (c *Controller) rateLimit(want int, base float64) int {
	if c.p.MaxStep == 0 || base <= 0 {
		return want
	}
	lo := math.Ceil(base / c.p.MaxStep)
	hi := math.Floor(base * c.p.MaxStep) // may be huge: clamp in float first
	w := max(lo, min(hi, float64(want)))
	return max(1, min(MaxWeight, int(w)))
}

// rescaleReason says that a weight was only moved with the backend's scale:
// when the function wanted something else, that the difference was inside the
// deadband and not written.
func rescaleReason(factor float64, scaled, wanted int) string {
	reason := fmt.Sprintf("%s (x%.3g)", ReasonRescale, factor)
	if wanted != scaled {
		reason += fmt.Sprintf("; own change to %d < %s, not written", wanted, ReasonDeadband)
	}
	return reason
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

package weighter

import (
	"fmt"
	"math"
)

// shareOut turns the function's weights into the backend's new weights and
// returns the factor the whole backend was scaled by (Plan.Scale).
//
// max_step bounds what moves traffic: a server's share of the backend's
// weight, w_i / Σ w_j over the servers in service, which is its share of new
// connections under roundrobin and what leastconn weighs connections by. The
// function's weights only say how the servers with data compare with one
// another (its lightest always gets max_weight), so they are first brought
// onto the backend's current weights b_i:
//
//	x_i = clamp(k · raw_i, b_i/max_step, b_i·max_step)   with k such that Σ x_i = Σ b_i
//
// where the sum runs over the servers with data and a weight now. With
// Σ x = Σ b, x_i / b_i is exactly the factor by which server i's share moves,
// so the clamp is the bound. A server held for missing data (missing: keep)
// or whose own change is inside the deadband keeps x_i = b_i: its share stays,
// and the others share out among themselves what they hold together, so one
// missed scrape of the lightest server moves no traffic to or from it. A
// server resumed from a drain (b_i = 0) has no share to bound and takes
// k · raw_i, at most the largest x_j. Then every weight is multiplied by one
// factor, which moves no traffic, so that the largest is max_weight, and
// rounded to an integer: the bound holds on the weights before rounding, each
// written weight being the nearest integer, and at least 1.
func (c *Controller) shareOut(active, held []*work, raw []int) float64 {
	step := c.p.MaxStep
	if step == 0 {
		step = math.Inf(1)
	}
	pinned := c.pins(len(active))
	k := c.shareFactor(active, held, pinned, raw, step, 0)
	top := topShared(active, held, pinned, raw, k, step)
	scale := c.backendScale(active, raw, k, top)
	if c.pinInsideDeadband(active, pinned, raw, k, scale) {
		// The pinned servers keep their share: the others share out again
		// what they hold together, or the pins would shift the total and
		// with it every other share.
		k = c.shareFactor(active, held, pinned, raw, step, k)
		top = topShared(active, held, pinned, raw, k, step)
		scale = c.backendScale(active, raw, k, top)
	}
	exact := c.buf.exact[:0]
	for i, w := range active {
		exact = append(exact, sharedWeight(w, float64(raw[i])*k, pinned[i], step, top)*scale)
	}
	c.buf.exact = exact
	bound := c.p.MaxRun > 0 && busy(active, held)
	if bound {
		scale *= c.boundRuns(active, held, exact, scale)
	}
	for i, w := range active {
		c.decideShared(w, float64(raw[i])*k*scale, exact[i], pinned[i], scale)
	}
	for _, w := range held {
		c.rescaleHeld(w, scale)
	}
	if bound {
		c.enforceRuns(active, held)
	}
	return scale
}

// pins returns the Controller's reused slice of n pin marks, all false.
func (c *Controller) pins(n int) []bool {
	p := c.buf.pinned[:0]
	for range n {
		p = append(p, false)
	}
	c.buf.pinned = p
	return p
}

// sharedWeight is x_i for a server whose function weight brought onto the
// backend's weights is want: its base weight when pinned, or want bounded to
// within a factor step of the base. A server without a base (resumed from a
// drain) enters at want, but no higher than top, the largest weight of the
// servers with a share: it was drained for its load, and above them it could
// take most new connections at once and scale every other weight down to
// the floor 1.
func sharedWeight(w *work, want float64, pinned bool, step, top float64) float64 {
	b := float64(w.base())
	switch {
	case b <= 0 && top > 0:
		return min(want, top)
	case b <= 0:
		return want
	case pinned:
		return b
	}
	return min(max(want, b/step), b*step)
}

// topShared is the largest x_i of the servers with a share (a base weight),
// held ones included; 0 when there is none.
func topShared(active, held []*work, pinned []bool, raw []int, k, step float64) float64 {
	top := 0.0
	for i, w := range active {
		if w.base() > 0 {
			top = max(top, sharedWeight(w, float64(raw[i])*k, pinned[i], step, 0))
		}
	}
	for _, w := range held {
		top = max(top, float64(w.base()))
	}
	return top
}

// shareFactor finds k with Σ clamp(k·raw_i, b_i/step, b_i·step) = Σ b_i over
// the servers with a base weight b_i > 0 that are not pinned. The sum grows
// with k, continuous and piecewise linear, from Σ b_i/step to Σ b_i·step, so
// solveShare finds it, between min b_i/raw_i and max b_i/raw_i: below the
// first every term is under its b_i, above the last every one is over. That
// bracket does not widen with step: [b/step/r, b·step/r] does, and a large
// max_step (1e20) left 64 halvings far from k, or started them from +Inf.
// When no such server is left, k is fallback (the factor of a first pass
// that pinned them all) or, when there is none, the one that puts the
// largest function weight level with the largest held weight (or leaves the
// function's weights as they are when nothing is held).
func (c *Controller) shareFactor(active, held []*work, pinned []bool, raw []int, step, fallback float64) float64 {
	// The solver reads every server several times: b_i and raw_i go into
	// two flat slices first, rather than through three pointers each time.
	lo, hi, rs := c.buf.shareLo[:0], c.buf.shareHi[:0], c.buf.shareR[:0]
	total, rawSum := 0.0, 0.0
	kLow, kHigh := math.Inf(1), 0.0
	for i, w := range active {
		if b := float64(w.base()); b > 0 && !pinned[i] {
			r := float64(raw[i]) // ≥ 1: every function returns weights in 1..max_weight
			lo, hi, rs = append(lo, b/step), append(hi, b*step), append(rs, r)
			total, rawSum = total+b, rawSum+r
			kLow, kHigh = min(kLow, b/r), max(kHigh, b/r)
		}
	}
	c.buf.shareLo, c.buf.shareHi, c.buf.shareR = lo, hi, rs
	switch {
	case total == 0 && fallback > 0:
		return fallback
	case total == 0:
		return levelWithHeld(held, raw)
	case math.IsInf(step, 1):
		return total / rawSum
	}
	piece := func(k float64) (sum, fixed, slope float64) {
		for i, r := range rs {
			switch x := k * r; {
			case x <= lo[i]:
				fixed += lo[i]
			case x >= hi[i]:
				fixed += hi[i]
			default:
				slope += r
			}
		}
		return fixed + slope*k, fixed, slope
	}
	k := solveShare(piece, total, kLow, kHigh, total/rawSum)
	if _, _, slope := piece(k); slope == 0 {
		return flatMiddle(lo, hi, rs, k)
	}
	return k
}

// flatMiddle is the middle (geometric) of the flat piece of the sum around
// k, where every server is at one of its bounds and any k there gives the
// same weights. Its ends would show some servers as getting just what the
// function wanted; in the middle every one is shown rate-limited, which is
// what happened: the function wanted a spread wider than max_step allows.
func flatMiddle(lo, hi, rs []float64, k float64) float64 {
	left, right := 0.0, math.Inf(1)
	for i, r := range rs {
		if k*r >= hi[i] {
			left = max(left, hi[i]/r)
		} else {
			right = min(right, lo[i]/r)
		}
	}
	if left == 0 || math.IsInf(right, 1) {
		return k
	}
	return math.Sqrt(left * right)
}

// solveShare finds k in [low, high] where the nondecreasing, continuous,
// piecewise linear sum(k) = fixed + slope·k reaches total, starting from
// guess. Each step solves the linear piece at the current k exactly and moves
// there, which lands on the answer as soon as k is on its piece (a few steps,
// against 64 halvings of a bisection); a step that would leave the bracket
// halves it instead, so it cannot go astray.
func solveShare(sum func(k float64) (s, fixed, slope float64), total, low, high, guess float64) float64 {
	k := min(max(guess, low), high)
	for range 200 {
		s, fixed, slope := sum(k)
		if math.Abs(s-total) <= total*1e-12 {
			return k
		}
		if s < total {
			low = k
		} else {
			high = k
		}
		next := (low + high) / 2
		if slope > 0 {
			if exact := (total - fixed) / slope; exact > low && exact < high {
				next = exact
			}
		}
		if next == k || !(high > low) {
			return k
		}
		k = next
	}
	return k
}

// levelWithHeld is the k that puts the largest of raw level with the largest
// held weight, or 1 when nothing is held.
func levelWithHeld(held []*work, raw []int) float64 {
	top, topRaw := 0.0, 1.0
	for _, w := range held {
		top = max(top, float64(w.base()))
	}
	for _, r := range raw {
		topRaw = max(topRaw, float64(r))
	}
	if top == 0 {
		return 1
	}
	return top / topRaw
}

// backendScale is the factor that makes the largest weight of the backend,
// after sharing out with k, max_weight: top, or when no server has a share,
// the largest function weight times k. It may be below 1: when the lightest
// server gains share, the others are scaled down rather than it up past
// max_weight.
func (c *Controller) backendScale(active []*work, raw []int, k, top float64) float64 {
	if top == 0 {
		for i := range active {
			top = max(top, float64(raw[i])*k)
		}
	}
	if !(top > 0) || math.IsInf(top, 1) {
		return 1
	}
	return float64(c.p.MaxWeight) / top
}

// pinInsideDeadband pins the servers whose own change is inside the
// deadband: the weight the function wants for them, on the backend's new
// scale, is within deadband of their current one on that scale. It reports
// whether it pinned any. A weight changed outside is never pinned (it is set
// back whatever the deadband), nor one without a base weight.
func (c *Controller) pinInsideDeadband(active []*work, pinned []bool, raw []int, k, scale float64) bool {
	if c.p.Deadband == 0 {
		return false
	}
	some := false
	for i, w := range active {
		b := float64(w.base())
		if b <= 0 || w.reapply() {
			continue
		}
		want, at := toWeight(float64(raw[i])*k*scale, MaxWeight), toWeight(b*scale, MaxWeight)
		if abs(want-at) < c.p.Deadband {
			pinned[i], some = true, true
		}
	}
	return some
}

// decideShared decides one server with data: want is what the function
// wanted for it on the backend's new scale, exact its new weight before
// rounding. The reason says why the written weight is not want: the rate
// limit, or the deadband that pinned its share (then it only moves with the
// backend's scale).
func (c *Controller) decideShared(w *work, want, exact float64, pinned bool, scale float64) {
	w.Raw = toWeight(want, MaxWeight) // capped: the function may want more than 256 on this scale
	nw := toWeight(exact, MaxWeight)
	limited := !pinned && math.Round(want) != math.Round(exact)
	switch {
	case nw == w.Current && pinned && w.Raw != nw:
		w.decide(ActionKeep, nw, ReasonDeadband)
	case nw == w.Current:
		w.decide(ActionKeep, nw, ReasonUnchanged)
	case w.reapply():
		w.decide(ActionSet, nw, ReasonReapply)
	case pinned:
		w.decide(ActionSet, nw, rescaleReason(scale, nw, w.Raw))
	case limited:
		w.decide(ActionSet, nw, ReasonRateLimit)
	default:
		w.decide(ActionSet, nw, ReasonRebalance)
	}
	if w.note != "" {
		w.Reason += "; " + w.note
	}
}

// rescaleHeld moves a held server's weight with the rest of the backend, so
// its share stays what it was. It is written whenever the rounded weight
// changes, deadband or not, like a server whose own change the deadband held:
// kept at its old integer while every other weight is scaled, its share would
// move by the scale (a 2 whose place is now 2.8 loses 29 % of its traffic)
// and could break max_step on its own.
func (c *Controller) rescaleHeld(w *work, scale float64) {
	scaled := toWeight(float64(w.base())*scale, MaxWeight)
	w.Raw = scaled
	switch {
	case scaled == w.Current:
		w.decide(ActionKeep, w.Current, ReasonMissing)
	case w.reapply():
		w.decide(ActionSet, scaled, ReasonReapply+"; "+ReasonMissing)
	default:
		w.decide(ActionSet, scaled, fmt.Sprintf("%s; %s (x%.3g)", ReasonMissing, ReasonRescale, scale))
	}
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

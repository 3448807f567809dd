package weighter

import (
	"fmt"
	"math"
)

// weighBesideHeld decides the weighted servers when some servers of the
// backend are held for missing data (missing: keep), and returns the factor
// the whole backend was scaled by.
//
// The function's weights only say how the servers with data compare with one
// another, not with the held ones: its lightest server always gets max_weight.
// Written as they are, one missed scrape of the lightest server would make
// every other weight double, then halve back, and shift traffic to or from the
// held servers that nobody measured. So the servers with data share out among
// themselves the weight b_i they hold together now:
//
//	x_i = clamp(k · raw_i, b_i/max_step, b_i·max_step)   with k such that Σ x_i = Σ b_i
//
// and then every weight of the backend, held ones included, is multiplied by
// one factor (moving no traffic) so that the largest is max_weight. A held
// server's share of the total weight stays what it was, up to rounding and
// the deadband, and no weight moves by more than max_step on that scale.
func (c *Controller) weighBesideHeld(active, held []*work, raw []int) float64 {
	step := c.p.MaxStep
	if step == 0 {
		step = math.Inf(1)
	}
	k := c.shareFactor(active, held, raw, step)
	top := 0.0 // the largest weight after sharing out, on the current scale
	for i, w := range active {
		x := float64(raw[i]) * k
		if b := float64(w.base()); b > 0 {
			x = min(max(x, b/step), b*step)
		}
		top = max(top, x)
	}
	for _, w := range held {
		top = max(top, float64(w.base()))
	}
	scale := float64(c.p.MaxWeight) / top
	for i, w := range active {
		w.Raw = toWeight(float64(raw[i])*k*scale, MaxWeight)
		c.finish(w, float64(w.base())*scale)
	}
	for _, w := range held {
		c.rescaleHeld(w, scale)
	}
	return scale
}

// shareFactor finds k with Σ clamp(k·raw_i, b_i/step, b_i·step) = Σ b_i over
// the servers with a base weight b_i > 0. The sum grows with k, continuous
// and piecewise linear, from Σ b_i/step to Σ b_i·step, so bisection finds it,
// between min b_i/raw_i and max b_i/raw_i: below the first every term is
// under its b_i, above the last every one is over. That bracket does not
// widen with step: [b/step/r, b·step/r] does, and a large max_step (1e20)
// left 64 halvings far from k, or started them from +Inf.
// Servers without a base (weight 0: resumed from a drain) take k·raw_i as it
// comes. When no server with data has a base weight, k puts the largest of
// them level with the largest held weight.
func (c *Controller) shareFactor(active, held []*work, raw []int, step float64) float64 {
	total, rawSum := 0.0, 0.0
	kLow, kHigh := math.Inf(1), 0.0
	for i, w := range active {
		if b := float64(w.base()); b > 0 {
			r := float64(raw[i]) // ≥ 1: every function returns weights in 1..max_weight
			total, rawSum = total+b, rawSum+r
			kLow, kHigh = min(kLow, b/r), max(kHigh, b/r)
		}
	}
	if total == 0 {
		top, topRaw := 0.0, 1.0
		for _, w := range held {
			top = max(top, float64(w.base()))
		}
		for _, r := range raw {
			topRaw = max(topRaw, float64(r))
		}
		return top / topRaw
	}
	if math.IsInf(step, 1) {
		return total / rawSum
	}
	sum := func(k float64) float64 {
		s := 0.0
		for i, w := range active {
			if b := float64(w.base()); b > 0 {
				s += min(max(k*float64(raw[i]), b/step), b*step)
			}
		}
		return s
	}
	for range 64 {
		mid := (kLow + kHigh) / 2
		if sum(mid) < total {
			kLow = mid
		} else {
			kHigh = mid
		}
	}
	return (kLow + kHigh) / 2
}

// rescaleHeld moves a held server's weight with the rest of the backend, so
// it stays comparable with the weighted ones. A change inside the deadband is
// not written, as for any other server, unless the kept weight would then be
// further than max_step from its place on the new scale.
func (c *Controller) rescaleHeld(w *work, scale float64) {
	scaled := toWeight(float64(w.base())*scale, MaxWeight)
	w.Raw = scaled
	switch {
	case scaled == w.Current:
		w.decide(ActionKeep, w.Current, ReasonMissing)
	case w.reapply():
		w.decide(ActionSet, scaled, ReasonReapply+"; "+ReasonMissing)
	case abs(scaled-w.Current) < c.p.Deadband && c.rateLimit(w.Current, float64(w.base())*scale) == w.Current:
		// inside the deadband, and not so far off the new scale (a weight
		// of 2 when it scales to 0.4) that keeping it would break max_step
		w.decide(ActionKeep, w.Current, ReasonMissing)
	default:
		w.decide(ActionSet, scaled, fmt.Sprintf("%s; %s (x%.3g)", ReasonMissing, ReasonRescale, scale))
	}
}

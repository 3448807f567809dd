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
//	x_i = clamp(k · raw_i, b_i/max_step, u_i)   with k such that Σ x_i = Σ b_i
//	u_i = max(b_i/max_step, min(b_i·max_step, c_i))
//
// where the sum runs over the servers with data and a weight now, and c_i is
// the run bound (max_run, maxrun.go; +Inf when it is off). With Σ x = Σ b,
// x_i / b_i is exactly the factor by which server i's share moves, so the
// clamp is the max_step bound, and the run bound is one more upper bound
// inside it: where the two conflict max_step wins (u_i never goes below
// b_i/max_step), and the run bound is reached over the following cycles.
// A server held for missing data (missing: keep) or whose own change is
// inside the deadband keeps x_i = b_i, or its run bound when that is lower
// (no lower than b_i/max_step): its share stays, and the others share out
// among themselves what they hold together, so one missed scrape of the
// lightest server moves no traffic to or from it. A server resumed from a
// drain (b_i = 0) has no share to bound and takes k · raw_i, at most the
// largest x_j and its run bound. Then every weight is multiplied by one
// factor, which moves no traffic, so that the largest is max_weight, and
// rounded to an integer: the bound holds on the weights before rounding, each
// written weight being the nearest integer, and at least 1.
func (c *Controller) shareOut(active, held []*work, raw []int) float64 {
	s := share{c: c, active: active, held: held, raw: raw, step: c.p.MaxStep, relax: 1}
	if s.step == 0 {
		s.step = math.Inf(1)
	}
	s.pinned = c.pins(len(active))
	s.solve()
	if c.pinInsideDeadband(active, s.pinned, raw, s.k, s.scale) {
		// The pinned servers keep their share: the others share out again
		// what they hold together, or the pins would shift the total and
		// with it every other share.
		s.fallback = s.k
		s.solve()
	}
	bound := c.p.MaxRun > 0 && busy(active, held)
	c.runs.bounded = bound
	if bound {
		s.boundRuns()
	}
	// every server's new weight before rounding, active servers then held
	exact := c.buf.exact[:0]
	for i := range len(active) + len(held) {
		exact = append(exact, s.xOf(i)*s.scale)
	}
	c.buf.exact = exact
	if bound {
		s.boundIntegers(exact)
	}
	for i, w := range active {
		c.decideShared(w, float64(raw[i])*s.k*s.scale, exact[i], s.pinned[i], s.scale)
	}
	for j, w := range held {
		c.rescaleHeld(w, exact[len(active)+j], s.scale)
	}
	return s.scale
}

// share is one cycle's sharing out: the servers, the function's weights, the
// bounds on each x_i, and the solution (k, and the scale that makes the
// largest weight max_weight).
type share struct {
	c            *Controller
	active, held []*work
	raw          []int  // the function's weights, per active server
	pinned       []bool // per active server: its share is kept (deadband)
	step         float64
	// caps are the run bound c_i, active servers then held ones, in the
	// units of x; nil when the bound is off.
	caps []float64
	// relax (≥ 1) multiplies every cap when max_step leaves no room for
	// them: the servers within their bound cannot take what the others
	// must give up (leastRelax).
	relax float64
	// fallback is the k of an earlier pass, for when every server is
	// pinned or held.
	fallback      float64
	k, top, scale float64
}

// solve finds k, the largest x (top) and the backend's scale for the
// current caps and pins.
func (s *share) solve() {
	s.relax = 1
	if s.caps != nil && !s.roomFor(1) {
		s.relax = s.leastRelax()
	}
	s.k = s.shareFactor()
	s.top = s.topShared()
	s.scale = s.c.backendScale(s.active, s.raw, s.k, s.top)
}

// capOf is the run bound of server i (active servers first, then held),
// loosened by relax for a server with a share; +Inf when there is none.
func (s *share) capOf(i int) float64 {
	switch {
	case s.caps == nil:
		return math.Inf(1)
	case s.baseOf(i) <= 0:
		return s.caps[i] // resumed from a drain: no share for max_step to keep
	case math.IsInf(s.relax, 1):
		return math.Inf(1)
	}
	return s.caps[i] * s.relax
}

// activeX is x_i of active server i.
func (s *share) activeX(i int) float64 {
	return sharedWeight(s.active[i], float64(s.raw[i])*s.k, s.pinned[i], s.step, s.top, s.capOf(i))
}

// heldX is x of held server j: its base, or its run bound when lower.
func (s *share) heldX(j int) float64 {
	return keptWeight(float64(s.held[j].base()), s.step, s.capOf(len(s.active)+j))
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
// backend's weights is want: its kept weight when pinned, or want bounded to
// within a factor step of the base and by its run bound. A server without a
// base (resumed from a drain) enters at want, but no higher than top, the
// largest weight of the servers with a share (it was drained for its load,
// and above them it could take most new connections at once and scale every
// other weight down to the floor 1), nor than its run bound.
func sharedWeight(w *work, want float64, pinned bool, step, top, runCap float64) float64 {
	b := float64(w.base())
	switch {
	case b <= 0 && top > 0:
		return min(want, top, runCap)
	case b <= 0:
		return min(want, runCap)
	case pinned:
		return keptWeight(b, step, runCap)
	}
	return min(max(want, b/step), ceiling(b, step, runCap))
}

// ceiling is u_i, the highest x a server of base weight b may take: b·step,
// or its run bound when lower, but never below b/step (max_step wins).
func ceiling(b, step, runCap float64) float64 {
	return max(b/step, min(b*step, runCap))
}

// keptWeight is x of a server whose share is kept (held for missing data,
// or pinned by the deadband): b, or its run bound when lower, but never
// below b/step.
func keptWeight(b, step, runCap float64) float64 {
	return max(b/step, min(b, runCap))
}

// topShared is the largest x_i of the servers with a share (a base weight),
// held ones included; 0 when there is none.
func (s *share) topShared() float64 {
	top := 0.0
	for i, w := range s.active {
		if w.base() > 0 {
			top = max(top, sharedWeight(w, float64(s.raw[i])*s.k, s.pinned[i], s.step, 0, s.capOf(i)))
		}
	}
	for j := range s.held {
		top = max(top, s.heldX(j))
	}
	return top
}

// roomFor reports whether, with the caps multiplied by t, the servers can
// still share out Σ b_i: every free server at its ceiling u_i and every
// kept one at its kept weight hold at least what they hold now. When they
// cannot, the run bound asks more than max_step allows in one cycle.
func (s *share) roomFor(t float64) bool {
	have, need := 0.0, 0.0
	for i, w := range s.active {
		b := float64(w.base())
		if b <= 0 {
			continue
		}
		need += b
		if s.pinned[i] {
			have += keptWeight(b, s.step, s.caps[i]*t)
		} else {
			have += ceiling(b, s.step, s.caps[i]*t)
		}
	}
	for j, w := range s.held {
		b := float64(w.base())
		need += b
		have += keptWeight(b, s.step, s.caps[len(s.active)+j]*t)
	}
	return have >= need*(1-1e-12)
}

// leastRelax is the least factor t ≥ 1 by which the caps must be loosened
// for roomFor to hold: the servers within their bound are then all at their
// ceiling b_i·max_step, and every capped server is over its bound by the
// same factor t. At the largest t that can matter (every cap above every
// b_i·step) nothing is capped and there is always room: bisection on log t.
func (s *share) leastRelax() float64 {
	hi := 1.0
	for i, c := range s.caps {
		if c > 0 && !math.IsInf(c, 1) {
			hi = max(hi, s.baseOf(i)*max(s.step, 1)/c)
		}
	}
	if math.IsInf(s.step, 1) || math.IsInf(hi, 1) || !s.roomFor(hi) {
		return math.Inf(1) // caps off: max_step alone always has room
	}
	lo := 1.0
	for range 100 {
		mid := math.Sqrt(lo * hi)
		if !(mid > lo && mid < hi) {
			break
		}
		if s.roomFor(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// baseOf is the base weight of server i, active servers then held ones.
func (s *share) baseOf(i int) float64 {
	if i < len(s.active) {
		return float64(s.active[i].base())
	}
	return float64(s.held[i-len(s.active)].base())
}

// shareFactor finds k with Σ clamp(k·raw_i, b_i/step, u_i) = Σ b_i − Σ (b_j −
// x_j) over the servers with a base weight b_i > 0 that are not pinned, the
// second sum over the kept ones (pinned, held) that their run bound lowered.
// The sum grows with k, continuous and piecewise linear, from Σ b_i/step to
// Σ u_i, so solveShare finds it, between min b_i/raw_i and max b_i/raw_i:
// below the first every term is under its b_i, above the last every one is
// over (unless a cap keeps it under: then the top of the bracket is where
// every term reaches min(u_i, total)). That bracket does not widen with
// step: [b/step/r, b·step/r] does, and a large max_step (1e20) left 64
// halvings far from k, or started them from +Inf. When no such server is
// left, k is fallback (the factor of a first pass that pinned them all) or,
// when there is none, the one that puts the largest function weight level
// with the largest held weight (or leaves the function's weights as they are
// when nothing is held).
func (s *share) shareFactor() float64 {
	c := s.c
	// The solver reads every server several times: the bounds and raw_i go
	// into flat slices first, rather than through three pointers each time.
	lo, hi, rs := c.buf.shareLo[:0], c.buf.shareHi[:0], c.buf.shareR[:0]
	total, rawSum, given := 0.0, 0.0, s.givenUp()
	kLow, kHigh := math.Inf(1), 0.0
	capped := false
	for i, w := range s.active {
		if b := float64(w.base()); b > 0 && !s.pinned[i] {
			r := float64(s.raw[i]) // ≥ 1: every function returns weights in 1..max_weight
			u := ceiling(b, s.step, s.capOf(i))
			capped = capped || u < b*s.step
			lo, hi, rs = append(lo, b/s.step), append(hi, u), append(rs, r)
			total, rawSum = total+b, rawSum+r
			kLow, kHigh = min(kLow, min(b, u)/r), max(kHigh, b/r)
		}
	}
	c.buf.shareLo, c.buf.shareHi, c.buf.shareR = lo, hi, rs
	switch {
	case total == 0 && s.fallback > 0:
		return s.fallback
	case total == 0:
		return levelWithHeld(s.held, s.raw)
	case math.IsInf(s.step, 1) && !capped:
		return total / rawSum
	}
	total += given
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
	if sum, _, _ := piece(kHigh); sum < total {
		for i, r := range rs {
			kHigh = max(kHigh, min(hi[i], total)/r)
		}
	}
	k := solveShare(piece, total, kLow, kHigh, total/rawSum)
	if _, _, slope := piece(k); slope == 0 {
		return flatMiddle(lo, hi, rs, k)
	}
	return k
}

// givenUp is what the kept servers (pinned, held) give up to their run
// bound, Σ (b_j − x_j): the free servers share it out on top of their own.
func (s *share) givenUp() float64 {
	if s.caps == nil {
		return 0
	}
	given := 0.0
	for i, w := range s.active {
		if b := float64(w.base()); b > 0 && s.pinned[i] {
			given += b - keptWeight(b, s.step, s.capOf(i))
		}
	}
	for j, w := range s.held {
		given += float64(w.base()) - s.heldX(j)
	}
	return given
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
// its share stays what it was (exact is its base, or its run bound when
// lower, on the new scale). It is written whenever the rounded weight
// changes, deadband or not, like a server whose own change the deadband held:
// kept at its old integer while every other weight is scaled, its share would
// move by the scale (a 2 whose place is now 2.8 loses 29 % of its traffic)
// and could break max_step on its own.
func (c *Controller) rescaleHeld(w *work, exact, scale float64) {
	scaled := toWeight(exact, MaxWeight)
	w.Raw = scaled
	switch {
	case scaled == w.Current:
		w.decide(ActionKeep, w.Current, ReasonMissing)
	case w.reapply():
		w.decide(ActionSet, scaled, ReasonReapply+"; "+ReasonMissing)
	default:
		w.decide(ActionSet, scaled, fmt.Sprintf("%s; %s (x%.3g)", ReasonMissing, ReasonRescale, scale))
	}
	if w.note != "" {
		w.Reason += "; " + w.note
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

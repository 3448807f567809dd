package weighter

import (
	"fmt"
	"math"
	"slices"
)

// The run bound (Policy.MaxRun): how many new connections in a row one
// server may take under HAProxy's weighted leastconn before half of the
// backend's servers take one.
//
// Leastconn gives a new connection to the server with the lowest
// (active+1)/weight (src/lb_fwlc.c). With r_i = w_i/(n_i+1), n_i the
// server's open connections (scur), a server i takes arrivals ahead of a
// server j while (n_i+k)/w_i ≤ (n_j+1)/w_j: k_i ≤ w_i/r_j − n_i. Weights are
// written every cycle but placed by for as long as they stand; with
// connections that live for hours arrivals are rare and nothing repairs a
// pile-up: a server whose weight says it is light takes every arrival of a
// burst (three heavy clients connecting together all land on it). The run
// bound caps every weight at
//
//	w_i ≤ (n_i + 1 + H) · r_ref        (H = MaxRun, or more: runAllowance)
//
// r_ref being the lower median server's (runReference): the 5th most
// favoured of 8. Before that server takes one new connection no server takes
// more than 1 + H, and over any burst server i takes
// k_i ≤ 1 + H + (n_i+1+H)/(n_ref+1) · k_ref. A burst spreads over at least
// the favoured half of the backend. The servers below the median (the
// loaded ones the weights keep new connections from) keep their weights:
// a bound against the least favoured server instead would give every other
// server its slot count as weight, leastconn by another name (measured:
// docs/production-world.md). H is counted in connections, fresh each cycle.
//
// The bound is applied after max_step (it may move a share further: it is
// a safety bound, as a drain is), on the weights before rounding, the
// backend rescaled so that its largest weight is max_weight again; then on
// the written integers, lowering any that rounding took past it. Weight 1,
// HAProxy's smallest, is never lowered further.

// runState is what the run bound remembers between cycles: each server's
// open connections at the last cycle and the EWMA of the new connections a
// server gains per cycle (RunChurn).
type runState struct {
	seen  map[string]int
	churn float64 // per server per cycle; NaN before two cycles
	h     float64 // this cycle's H
}

// runAlpha is the weight of one cycle in the churn's EWMA: a half-life of
// about 30 cycles (a minute at 2 s), so that a burst barely moves it.
const runAlpha = 0.0228

// runAllowance sets this cycle's H: MaxRun, or with RunChurn > 0, at least
// RunChurn times the new connections a server gains per cycle on average
// (the EWMA of the mean over the servers of max(0, n_i − n_i before)). A
// server's gains are a lower bound of its arrivals (a departure in the same
// cycle hides one), which the factor absorbs. Where connections are many
// and short a server gains a few every cycle and H grows with them, so the
// weights keep the reach they need; where they are rare and long H stays at
// MaxRun, and a burst cannot follow the weights onto one server.
func (c *Controller) runAllowance(ws []work) {
	st := &c.runs
	st.h = c.p.MaxRun
	if c.p.RunChurn <= 0 {
		return
	}
	if st.seen == nil {
		st.seen, st.churn = map[string]int{}, math.NaN()
	}
	gained, known := 0, 0
	for i := range ws {
		w := &ws[i]
		if before, ok := st.seen[w.Server]; ok {
			gained += max(0, w.sessions-before)
			known++
		}
		st.seen[w.Server] = w.sessions
	}
	if len(st.seen) > 2*len(ws) { // servers come and go: forget the gone
		clear(st.seen)
		for i := range ws {
			st.seen[ws[i].Server] = ws[i].sessions
		}
	}
	if known > 0 {
		x := float64(gained) / float64(known)
		if math.IsNaN(st.churn) {
			st.churn = x
		} else {
			st.churn += runAlpha * (x - st.churn)
		}
	}
	if !math.IsNaN(st.churn) {
		st.h = max(st.h, c.p.RunChurn*st.churn)
	}
}

// ReasonMaxRun is the note of a weight the run bound lowered.
const ReasonMaxRun = "run bound (max_run)"

// boundRuns caps the weights before rounding, exact[i] for active[i] (held
// servers at base × scale), and returns the factor every weight was then
// multiplied by so that the largest is max_weight (1 when none was capped).
func (c *Controller) boundRuns(active, held []*work, exact []float64, scale float64) float64 {
	rs := c.buf.runR[:0]
	for i, w := range active {
		if exact[i] > 0 {
			rs = append(rs, exact[i]/float64(w.sessions+1))
		}
	}
	for _, w := range held {
		if b := float64(w.base()) * scale; b > 0 {
			rs = append(rs, b/float64(w.sessions+1))
		}
	}
	c.buf.runR = rs
	rMin, ok := runReference(rs)
	if !ok {
		return 1
	}
	capped, top := false, 0.0
	for i, w := range active {
		if limit := (float64(w.sessions+1) + c.runs.h) * rMin; exact[i] > limit {
			exact[i], capped = limit, true
			c.noteRun(w)
		}
		top = max(top, exact[i])
	}
	for _, w := range held {
		// A held server keeps its share (missing data moves no traffic)
		// unless the bound says otherwise: enforceRuns lowers it.
		b := float64(w.base()) * scale
		if limit := (float64(w.sessions+1) + c.runs.h) * rMin; b > limit {
			b, capped = limit, true
		}
		top = max(top, b)
	}
	if !capped {
		return 1
	}
	if !(top > 0) {
		return 1
	}
	f := float64(c.p.MaxWeight) / top
	for i := range exact {
		exact[i] *= f
	}
	return f
}

// enforceRuns keeps the bound on the integer weights the plan writes:
// rounding can take a weight past (n_i+1+H) · r_m by up to half a unit, and
// the least favoured server's own rounding moves r_m. A weight lowered to
// its integer limit can itself fall below r_m (when H · r_m < 1) and become
// the least favoured, so the pass repeats until nothing changes; it only
// lowers weights, which are integers of at least 1, so it ends.
func (c *Controller) enforceRuns(active, held []*work) {
	for range 1000 {
		if !c.enforceRunsOnce(active, held) {
			return
		}
	}
}

// enforceRunsOnce lowers every weight above its limit and reports whether
// it lowered any.
func (c *Controller) enforceRunsOnce(active, held []*work) bool {
	rs := c.buf.runR[:0]
	for _, ws := range [][]*work{active, held} {
		for _, w := range ws {
			if w.New > 0 {
				rs = append(rs, float64(w.New)/float64(w.sessions+1))
			}
		}
	}
	c.buf.runR = rs
	rMin, ok := runReference(rs)
	if !ok {
		return false
	}
	lowered := false
	for _, ws := range [][]*work{active, held} {
		for _, w := range ws {
			limit := int(math.Floor((float64(w.sessions+1)+c.runs.h)*rMin + 1e-9))
			if w.New <= limit || w.New <= 1 {
				continue
			}
			nw, reason := max(limit, 1), ReasonRebalance
			if !w.valid() {
				reason = ReasonMissing
			}
			lowered = true
			c.noteRun(w)
			switch {
			case nw == w.Current:
				w.decide(ActionKeep, nw, ReasonUnchanged+"; "+w.note)
			default:
				w.decide(ActionSet, nw, reason+"; "+w.note)
			}
		}
	}
	return lowered
}

// busy reports whether the servers carry at least one open connection each
// on average: below that most arrivals find an idle server, which HAProxy's
// leastconn fills first whatever its weight (key 0), one each in turn, and
// the bound is not applied (an idle backend, a target that reports no
// connections).
func busy(active, held []*work) bool {
	open, n := 0, 0
	for _, ws := range [][]*work{active, held} {
		for _, w := range ws {
			open += w.sessions
			n++
		}
	}
	return n > 0 && open >= n
}

// runReference is r_ref, the weight per connection slot (w/(n+1)) of the
// lower median server in leastconn's order (the (⌊S/2⌋+1)-th most favoured
// of the S servers with a weight: the 5th of 8, the 2nd of 2); false when
// there is none. rs is reordered.
func runReference(rs []float64) (float64, bool) {
	if len(rs) == 0 {
		return 0, false
	}
	slices.Sort(rs)
	return rs[(len(rs)-1)/2], true
}

// noteRun records on w that the run bound lowered its weight.
func (c *Controller) noteRun(w *work) {
	note := fmt.Sprintf("%s: at most %.3g new connections in a row", ReasonMaxRun, 1+c.runs.h)
	if w.note != "" && w.note != note {
		note = w.note + "; " + note
	}
	w.note = note
}

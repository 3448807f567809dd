package weighter

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// drain applies saturation drain with hysteresis: a server whose load rises
// above DrainAbove gets weight 0 (no new connections; existing ones stay) until
// its load falls below ResumeBelow. Never more than MaxDrained of the backend's
// servers are drained at once; the most loaded go first. A drained server whose
// data goes missing stays drained: no data is no proof it recovered.
func (c *Controller) drain(ws []work) {
	if !c.p.draining() {
		return
	}
	limit := int(math.Floor(c.p.MaxDrained * float64(len(ws))))
	count := 0
	for i := range ws {
		w := &ws[i]
		if !w.mem.drained {
			continue
		}
		switch {
		case !w.weightable(): // down or taken over by an operator: not ours any more
			w.mem.drained = false
		case w.valid() && w.Load < c.p.ResumeBelow:
			w.mem.drained = false
			w.note = fmt.Sprintf("resumed: load %.4g < resume_below %.4g", w.Load, c.p.ResumeBelow)
		default:
			count++
			c.keepDrained(w)
		}
	}
	for _, w := range drainCandidates(ws, c.p.DrainAbove) {
		if count >= limit {
			w.note = fmt.Sprintf("load %.4g > drain_above but max_drained reached", w.Load)
			continue
		}
		w.mem.drained = true
		count++
		c.keepDrained(w)
	}
}

// drainCandidates are the weightable servers above the threshold and not yet
// drained, most loaded first.
func drainCandidates(ws []work, above float64) []*work {
	var out []*work
	for i := range ws {
		if w := &ws[i]; w.weightable() && w.valid() && w.Load > above && !w.mem.drained {
			out = append(out, w)
		}
	}
	slices.SortStableFunc(out, func(a, b *work) int { return cmp.Compare(b.Load, a.Load) })
	return out
}

func (c *Controller) keepDrained(w *work) {
	w.Raw = 0
	if w.Current == 0 {
		w.decide(ActionKeep, 0, fmt.Sprintf("drained (resumes below %.4g)", c.p.ResumeBelow))
		return
	}
	w.decide(ActionSet, 0, fmt.Sprintf("drained: load %.4g > drain_above %.4g", w.Load, c.p.DrainAbove))
}

package weighter

import "fmt"

// classify marks a server that is not ours to weight: operator drain or
// maint (unless ManageOperatorStates), down or stopping, and weight 0 that we
// did not set (an operator's drain by weight). Whether a 0 is ours is the
// target's to say (ServerState.OwnZero, from the process's one record of its
// writes, which outlives this Controller across reloads), or a drain this
// Controller decided and has not resumed.
func (c *Controller) classify(w *work, s *ServerState) {
	switch {
	case !c.p.ManageOperatorStates && (s.Admin == AdminDrain || s.Admin == AdminMaint):
		w.decide(ActionSkip, w.Current, "operator "+string(s.Admin))
	case s.Operational == "down" || s.Operational == "stopping":
		w.decide(ActionSkip, w.Current, s.Operational)
	case w.Current == 0 && !w.mem.drained && !s.OwnZero:
		w.decide(ActionSkip, 0, "operator drain (weight 0 not set by us)")
	case w.Current < 0:
		// Above MaxWeight is fine: IPVS allows weights up to 2^31-1 and the
		// first write brings them into 1..MaxWeight.
		w.decide(ActionSkip, w.Current, fmt.Sprintf("current weight %d out of range", w.Current))
	}
}

// loadStats describes the weightable servers of a backend: how many there
// are, how many of them have valid data, and the maximum and mean of those loads.
type loadStats struct {
	n, valid  int
	top, mean float64
}

// statsOf computes the loadStats of ws without allocating. The mean is summed
// in units of the maximum, so it cannot overflow.
func statsOf(ws []work) loadStats {
	var st loadStats
	for i := range ws {
		if w := &ws[i]; w.weightable() {
			st.n++
			if w.valid() {
				st.valid, st.top = st.valid+1, max(st.top, w.Load)
			}
		}
	}
	if st.valid == 0 || st.top == 0 {
		return st
	}
	sum := 0.0
	for i := range ws {
		if w := &ws[i]; w.weightable() && w.valid() {
			sum += w.Load / st.top
		}
	}
	st.mean = sum / float64(st.valid) * st.top
	return st
}

// coverage is the share of weightable servers with valid data (0 when none).
func (st loadStats) coverage() float64 {
	if st.n == 0 {
		return 0
	}
	return float64(st.valid) / float64(st.n)
}

// imbalance is max/mean of the valid loads of weightable servers, 0 when undefined.
func (st loadStats) imbalance() float64 {
	if st.valid == 0 || !(st.mean > 0) {
		return 0
	}
	return st.top / st.mean // at most n, since mean ≥ top/n
}

// holdReason says why the backend must not change this cycle, or "".
func (c *Controller) holdReason(st loadStats) string {
	cov := st.coverage()
	switch {
	case st.n == 0:
		return "no weightable servers"
	case st.valid < 2:
		return fmt.Sprintf("only %d of %d servers have valid data (need at least 2)", st.valid, st.n)
	case cov < c.p.MinCoverage:
		return fmt.Sprintf("only %d of %d servers have valid data (%.0f%% < min_coverage %.0f%%)",
			st.valid, st.n, 100*cov, 100*c.p.MinCoverage)
	}
	return ""
}

func holdAll(ws []work, reason string) { keepAll(ws, "hold: "+reason) }

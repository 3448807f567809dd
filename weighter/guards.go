package weighter

import "fmt"

// classify marks the servers that are not ours to weight: operator drain or
// maint (unless ManageOperatorStates), down or stopping, and weight 0 that we
// did not set (an operator's drain by weight).
func (c *Controller) classify(ws []*work) {
	for _, w := range ws {
		switch {
		case !c.p.ManageOperatorStates && (w.st.Admin == AdminDrain || w.st.Admin == AdminMaint):
			w.decide(ActionSkip, w.Current, "operator "+string(w.st.Admin))
		case w.st.Operational == "down" || w.st.Operational == "stopping":
			w.decide(ActionSkip, w.Current, w.st.Operational)
		case w.Current == 0 && !c.drained[w.Server] && w.written != 0:
			w.decide(ActionSkip, 0, "operator drain (weight 0 not set by us)")
		case !ValidWeight(w.Current):
			w.decide(ActionSkip, w.Current, fmt.Sprintf("current weight %d out of range", w.Current))
		}
	}
}

// dataCount counts the weightable servers and those of them with valid data.
func dataCount(ws []*work) (n, valid int) {
	for _, w := range ws {
		if w.weightable() {
			n++
			if w.valid() {
				valid++
			}
		}
	}
	return n, valid
}

// coverage is the share of weightable servers with valid data (0 when none).
func coverage(n, valid int) float64 {
	if n == 0 {
		return 0
	}
	return float64(valid) / float64(n)
}

// imbalance is max/mean of the valid loads of weightable servers, 0 when undefined.
func imbalance(ws []*work) float64 {
	n, top, m := loadStats(ws)
	if n == 0 || !(m > 0) {
		return 0
	}
	return top / m // at most n, since m ≥ top/n
}

// loadStats returns the count, maximum and mean of the valid loads of the
// weightable servers, without allocating. The mean is summed in units of the
// maximum, so it cannot overflow.
func loadStats(ws []*work) (n int, top, m float64) {
	for _, w := range ws {
		if w.weightable() && w.valid() {
			n, top = n+1, max(top, w.Load)
		}
	}
	if n == 0 || top == 0 {
		return n, top, 0
	}
	sum := 0.0
	for _, w := range ws {
		if w.weightable() && w.valid() {
			sum += w.Load / top
		}
	}
	return n, top, sum / float64(n) * top
}

// holdReason says why the backend must not change this cycle, or "": n
// weightable servers, valid of them with data, cov = valid/n.
func (c *Controller) holdReason(n, valid int, cov float64) string {
	switch {
	case n == 0:
		return "no weightable servers"
	case valid < 2:
		return fmt.Sprintf("only %d of %d servers have valid data (need at least 2)", valid, n)
	case cov < c.p.MinCoverage:
		return fmt.Sprintf("only %d of %d servers have valid data (%.0f%% < min_coverage %.0f%%)",
			valid, n, 100*cov, 100*c.p.MinCoverage)
	}
	return ""
}

func holdAll(ws []*work, reason string) {
	for _, w := range ws {
		if w.weightable() {
			w.decide(ActionKeep, w.Current, "hold: "+reason)
		}
	}
}

package weighter

import "math"

// LimitedProportions gives each server a weight proportional to (mean/load)^A,
// where no load counts as lower than mean/L, so an idle server cannot attract
// everything (the herding Mitzenmacher warns about). The lightest server gets
// p.MaxWeight:
//
//	m = mean(x); y_i = max(x_i, m/L); r_i = (m/y_i)^A
//	w_i = clamp(round(max_weight · r_i / max_j r_j), 1, max_weight)
func LimitedProportions(loads []float64, _ []int, p Policy) []int {
	xs, m := normalised(loads)
	if m == 0 {
		return filled(len(loads), p.MaxWeight)
	}
	floor := m / p.LimitingFactor
	r := xs // r_i replaces x_i in place: x_i is not needed afterwards
	top := 0.0
	for i, x := range xs {
		r[i] = m / max(x, floor)
		if p.Aggressiveness != 1 { // Pow is the costliest step; A = 1 is the default
			r[i] = math.Pow(r[i], p.Aggressiveness)
		}
		top = max(top, r[i])
	}
	w := make([]int, len(xs))
	for i := range r {
		w[i] = toWeight(float64(p.MaxWeight)*r[i]/top, p.MaxWeight)
	}
	return w
}

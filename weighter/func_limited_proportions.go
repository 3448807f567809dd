package weighter

import (
	"math"
	"slices"
)

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
	// r_i / max_j r_j = (m/y_i)^A / (m/y_min)^A = (y_min/y_i)^A, computed in
	// that form: it lies in (0, 1], so a large A underflows towards weight 1
	// where (m/y_i)^A would overflow to +Inf and make every weight NaN.
	yMin := max(slices.Min(xs), floor)
	w := make([]int, len(xs))
	for i, x := range xs {
		r := yMin / max(x, floor)
		if p.Aggressiveness != 1 { // Pow is the costliest step; A = 1 is the default
			r = math.Pow(r, p.Aggressiveness)
		}
		w[i] = toWeight(float64(p.MaxWeight)*r, p.MaxWeight)
	}
	return w
}

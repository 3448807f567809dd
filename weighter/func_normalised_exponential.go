package weighter

import (
	"math"
	"slices"
)

// NormalisedExponential weights each server by how far its load lies above the
// lightest one, in units of the mean load:
//
//	m = mean(x); r_i = exp(−A · (x_i − min_j x_j) / m)
//	w_i = clamp(round(max_weight · r_i), 1, max_weight)
func NormalisedExponential(loads []float64, _ []int, p Policy) []int {
	xs, m := normalised(loads)
	if m == 0 {
		return filled(len(loads), p.MaxWeight)
	}
	low := slices.Min(xs)
	w := make([]int, len(xs))
	for i, x := range xs {
		r := math.Exp(-p.Aggressiveness * (x - low) / m)
		w[i] = toWeight(float64(p.MaxWeight)*r, p.MaxWeight)
	}
	return w
}

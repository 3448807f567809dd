package weighter

import "math"

// Feedback is the stateful, integral weighting (Robinhood-style): each cycle it
// multiplies a server's current weight by (mean/load)^gain, at most by MaxStep
// either way, then rescales so the largest weight is p.MaxWeight (keeping the
// resolution of 1..256 whatever the weights started from). Unlike the stateless
// functions it keeps correcting until the loads are equal, which is what
// leastconn needs: there equal loads want weights ∝ connections/load, not ∝ 1/load.
// A current weight ≤ 0 counts as p.MaxWeight.
func Feedback(loads []float64, current []int, p Policy) []int {
	xs, m := normalised(loads)
	if m == 0 {
		return filled(len(loads), p.MaxWeight)
	}
	step := p.MaxStep
	if step == 0 {
		step = math.Inf(1)
	}
	next := make([]float64, len(xs))
	top := 0.0
	for i, x := range xs {
		base := float64(p.MaxWeight)
		if i < len(current) && current[i] > 0 {
			base = float64(current[i])
		}
		f := math.Inf(1)
		if x > 0 {
			f = math.Pow(m/x, p.Gain)
		}
		next[i] = base * min(max(f, 1/step), step)
		if math.IsInf(next[i], 1) {
			next[i] = math.MaxFloat64
		}
		top = max(top, next[i])
	}
	w := make([]int, len(xs))
	for i, v := range next {
		w[i] = toWeight(float64(p.MaxWeight)*(v/top), p.MaxWeight)
	}
	return w
}

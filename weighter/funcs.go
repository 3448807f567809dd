package weighter

import (
	"fmt"
	"math"
	"slices"
)

// Func maps the loads of n ≥ 1 servers (all finite and ≥ 0) to weights in
// 1..p.MaxWeight, one per load. current holds the weights the servers have now
// (same length as loads); stateless functions ignore it.
type Func func(loads []float64, current []int, p Policy) []int

// Functions is the registry of weighting functions by name. Policy.Validate and
// Compute look names up here, so there is one list only.
var Functions = map[string]Func{
	"limited-proportions":    LimitedProportions,
	"normalised-exponential": NormalisedExponential,
	"feedback":               Feedback,
}

// integrates reports whether the named function integrates the error (its
// output depends on the current weights), so must see each data point once.
func integrates(name string) bool { return name == "feedback" }

// FunctionNames returns the registered function names, sorted.
func FunctionNames() []string {
	names := make([]string, 0, len(Functions))
	for name := range Functions {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Compute validates its input and runs the policy's weighting function once,
// without any of the Controller's guards. current may be nil.
func Compute(p Policy, loads []float64, current []int) ([]int, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("invalid policy: %w", err)
	}
	if len(loads) == 0 {
		return nil, fmt.Errorf("no loads")
	}
	for i, x := range loads {
		if !validLoad(x) {
			return nil, fmt.Errorf("load %d is %v: must be finite and >= 0", i, x)
		}
	}
	if current == nil {
		current = filled(len(loads), p.MaxWeight)
	}
	if len(current) != len(loads) {
		return nil, fmt.Errorf("%d current weights for %d loads", len(current), len(loads))
	}
	return Functions[p.Function](loads, current, p), nil
}

// validLoad reports whether x can be used as a load: not NaN, not ±Inf, not negative.
func validLoad(x float64) bool { return x >= 0 && x <= math.MaxFloat64 }

func isInf(x float64) bool { return math.IsInf(x, 0) }

// normalised returns loads divided by their maximum, so the sums below cannot
// overflow, and their mean. Both functions are scale-invariant, so this changes
// nothing but the float range. The mean is 0 when all loads are 0.
func normalised(loads []float64) (xs []float64, mean float64) {
	top := slices.Max(loads)
	xs = make([]float64, len(loads))
	if top == 0 {
		return xs, 0
	}
	sum := 0.0
	for i, x := range loads {
		xs[i] = x / top
		sum += xs[i]
	}
	return xs, sum / float64(len(xs))
}

// toWeight rounds half away from zero and clamps to 1..max.
func toWeight(v float64, max int) int {
	if math.IsNaN(v) || v < 1 {
		return 1
	}
	if v > float64(max) {
		return max
	}
	return min(max, max1(int(math.Round(v))))
}

func max1(w int) int { return max(w, 1) }

func filled(n, w int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = w
	}
	return out
}

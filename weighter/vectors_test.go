package weighter

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExactVectors checks the example vectors of the README (round half away from zero).
func TestExactVectors(t *testing.T) {
	a := []float64{10, 20, 40, 0}
	b := []float64{5, 5000, 50, 500, 10}
	tests := []struct {
		name  string
		fn    string
		l, a  float64
		loads []float64
		want  []int
	}{
		{"LP L4 A1", "limited-proportions", 4, 1, a, []int{112, 56, 28, 256}},
		{"LP L4 A2", "limited-proportions", 4, 2, a, []int{49, 12, 3, 256}},
		{"LP L4 A1 wide", "limited-proportions", 4, 1, b, []int{256, 14, 256, 142, 256}},
		{"NE A1", "normalised-exponential", 4, 1, a, []int{145, 82, 26, 256}},
		{"NE A1 wide", "normalised-exponential", 4, 1, b, []int{256, 3, 246, 164, 255}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.Function, p.LimitingFactor, p.Aggressiveness = tc.fn, tc.l, tc.a
			got, err := Compute(p, tc.loads, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestEqualLoadsGetMaxWeight: every function gives equal loads the maximum weight.
func TestEqualLoadsGetMaxWeight(t *testing.T) {
	for _, name := range FunctionNames() {
		for _, loads := range [][]float64{{100, 100, 100, 100}, {0, 0, 0}, {7}} {
			p := DefaultPolicy()
			p.Function = name
			got, err := Compute(p, loads, nil)
			require.NoError(t, err)
			assert.Equal(t, filled(len(loads), 256), got, "%s %v", name, loads)
		}
	}
}

// TestFeedbackStep checks one step by hand: m = 20, factors √2 and √(2/3),
// 362.04 and 209.02 from 256, rescaled so the larger is 256.
func TestFeedbackStep(t *testing.T) {
	p := DefaultPolicy()
	p.Function = "feedback"
	got, err := Compute(p, []float64{10, 30}, []int{256, 256})
	require.NoError(t, err)
	assert.Equal(t, []int{256, 148}, got)

	// the step is capped at max_step: the idle server only doubles, 64 → 128,
	// the other goes 256 · (15/30)^0.5 = 181.02; rescaled by 256/181.02
	got, err = Compute(p, []float64{0, 30}, []int{64, 256})
	require.NoError(t, err)
	assert.Equal(t, []int{181, 256}, got)

	// a current weight of 0 (drained) counts as max_weight
	got, err = Compute(p, []float64{10, 10}, []int{0, 128})
	require.NoError(t, err)
	assert.Equal(t, []int{256, 128}, got)
}

// TestExtremeAggressiveness: a large A must still give the lightest server
// max_weight. (m/y_i)^A overflowed to +Inf for A = 1e5, the ratio of two
// infinities was NaN, and every server got weight 1.
func TestExtremeAggressiveness(t *testing.T) {
	for _, fn := range []string{"limited-proportions", "normalised-exponential"} {
		p := DefaultPolicy()
		p.Function, p.Aggressiveness = fn, 1e5
		got, err := Compute(p, []float64{1, 2, 3}, nil)
		require.NoError(t, err)
		assert.Equal(t, []int{256, 1, 1}, got, fn)
		got, err = Compute(p, []float64{3, 1e-300, 1e300}, nil)
		require.NoError(t, err)
		assert.Equal(t, 256, slices.Max(got), fn)
		assert.Equal(t, 256, got[1], fn)
	}
}

package weighter

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

func TestDefaultPolicyIsValid(t *testing.T) {
	require.NoError(t, DefaultPolicy().Validate())
}

// TestValidateRejects has one case per rule, each with its exact message.
func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Policy)
		want string
	}{
		{"unknown function", func(p *Policy) { p.Function = "magic" },
			`function "magic" is unknown, valid: feedback, limited-proportions, normalised-exponential`},
		{"empty function", func(p *Policy) { p.Function = "" },
			`function "" is unknown, valid: feedback, limited-proportions, normalised-exponential`},
		{"limiting factor below 1", func(p *Policy) { p.LimitingFactor = 0.5 }, "limiting_factor must be > 1, got 0.5"},
		{"limiting factor 1", func(p *Policy) { p.LimitingFactor = 1 }, "limiting_factor must be > 1, got 1"},
		{"limiting factor NaN", func(p *Policy) { p.LimitingFactor = nan }, "limiting_factor must be > 1, got NaN"},
		{"limiting factor Inf", func(p *Policy) { p.LimitingFactor = inf }, "limiting_factor must be > 1, got +Inf"},
		{"aggressiveness 0", func(p *Policy) { p.Aggressiveness = 0 }, "aggressiveness must be > 0, got 0"},
		{"aggressiveness negative", func(p *Policy) { p.Aggressiveness = -1 }, "aggressiveness must be > 0, got -1"},
		{"gain 0", func(p *Policy) { p.Gain = 0 }, "gain must be > 0, got 0"},
		{"max weight 0", func(p *Policy) { p.MaxWeight = 0 }, "max_weight must be in 1..256, got 0"},
		{"max weight 257", func(p *Policy) { p.MaxWeight = 257 }, "max_weight must be in 1..256, got 257"},
		{"unknown aggregate", func(p *Policy) { p.Aggregate = "p99" },
			`aggregate "p99" is unknown, valid: last, avg, max, median`},
		{"negative max age", func(p *Policy) { p.MaxAge = duration.Duration(-time.Second) }, "max_age must be >= 0, got -1s"},
		{"unknown missing", func(p *Policy) { p.Missing = "zero" }, `missing "zero" is unknown, valid: keep, mean`},
		{"coverage above 1", func(p *Policy) { p.MinCoverage = 1.5 }, "min_coverage must be in 0..1, got 1.5"},
		{"coverage negative", func(p *Policy) { p.MinCoverage = -0.1 }, "min_coverage must be in 0..1, got -0.1"},
		{"deadband negative", func(p *Policy) { p.Deadband = -1 }, "deadband must be in 0..256, got -1"},
		{"max step 1", func(p *Policy) { p.MaxStep = 1 }, "max_step must be > 1 (or 0 = off), got 1"},
		{"max step negative", func(p *Policy) { p.MaxStep = -2 }, "max_step must be > 1 (or 0 = off), got -2"},
		{"smoothing negative", func(p *Policy) { p.Smoothing = duration.Duration(-time.Second) }, "smoothing must be >= 0, got -1s"},
		{"panic threshold 1", func(p *Policy) { p.PanicThreshold = 1 }, "panic_threshold must be > 1 (or 0 = off), got 1"},
		{"drain above negative", func(p *Policy) { p.DrainAbove = -1 }, "drain_above must be >= 0, got -1"},
		{"resume without drain", func(p *Policy) { p.ResumeBelow = 5 },
			"resume_below is set (5) but drain_above is 0 (drain off)"},
		{"resume above drain", func(p *Policy) { p.DrainAbove, p.ResumeBelow = 10, 12 },
			"resume_below must be > 0 and < drain_above (10), got 12"},
		{"resume equal drain", func(p *Policy) { p.DrainAbove, p.ResumeBelow = 10, 10 },
			"resume_below must be > 0 and < drain_above (10), got 10"},
		{"drain without resume", func(p *Policy) { p.DrainAbove = 10 },
			"resume_below must be > 0 and < drain_above (10), got 0"},
		{"max drained 1", func(p *Policy) { p.MaxDrained = 1 }, "max_drained must be in 0..1 (1 excluded), got 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			tc.edit(&p)
			err := p.Validate()
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			_, err = NewController(p)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	p := DefaultPolicy()
	p.MaxWeight, p.Deadband = 0, -1
	assert.EqualError(t, p.Validate(), "max_weight must be in 1..256, got 0\ndeadband must be in 0..256, got -1")
}

// TestComputeRejects: Compute validates what the functions assume.
func TestComputeRejects(t *testing.T) {
	bad := DefaultPolicy()
	bad.LimitingFactor = 0
	tests := []struct {
		name    string
		p       Policy
		loads   []float64
		current []int
		want    string
	}{
		{"no loads", DefaultPolicy(), nil, nil, "no loads"},
		{"NaN load", DefaultPolicy(), []float64{1, nan}, nil, "load 1 is NaN: must be finite and >= 0"},
		{"Inf load", DefaultPolicy(), []float64{inf, 1}, nil, "load 0 is +Inf: must be finite and >= 0"},
		{"negative load", DefaultPolicy(), []float64{1, -2}, nil, "load 1 is -2: must be finite and >= 0"},
		{"current length", DefaultPolicy(), []float64{1, 2}, []int{1}, "1 current weights for 2 loads"},
		{"invalid policy", bad, []float64{1}, nil, "invalid policy: limiting_factor must be > 1, got 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compute(tc.p, tc.loads, tc.current)
			assert.EqualError(t, err, tc.want)
		})
	}
}

// TestPolicyYAMLOverDefaults: a config decodes onto DefaultPolicy, durations as "5m".
func TestPolicyYAMLOverDefaults(t *testing.T) {
	p := DefaultPolicy()
	dec := yaml.NewDecoder(strings.NewReader("function: feedback\nmax_age: 30s\nsmoothing: 1m\ndrain_above: 900\nresume_below: 700\n"))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&p))
	want := DefaultPolicy()
	want.Function, want.MaxAge, want.Smoothing, want.DrainAbove, want.ResumeBelow = "feedback", duration.Duration(30*time.Second), duration.Duration(time.Minute), 900, 700
	assert.Equal(t, want, p)
	require.NoError(t, p.Validate())
}

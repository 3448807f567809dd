package weighter

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
)

// Policy is the per-backend configuration of the weighting engine: which function
// turns loads into weights, and the guards that make the result safe to write.
// Zero values are not defaults: start from DefaultPolicy and override fields.
type Policy struct {
	// Function is the name of a weighting function in Functions.
	Function string `yaml:"function" json:"function"`
	// LimitingFactor (L > 1) caps how much lighter than the mean a server may look
	// to limited-proportions: no server counts as lighter than mean/L.
	LimitingFactor float64 `yaml:"limiting_factor" json:"limiting_factor"`
	// Aggressiveness (A > 0) is the exponent of the load ratio: 2 squares the contrast.
	Aggressiveness float64 `yaml:"aggressiveness" json:"aggressiveness"`
	// Gain (> 0) is the exponent of the per-cycle correction of the feedback function.
	Gain float64 `yaml:"gain" json:"gain"`
	// MaxWeight (1..256) is the weight the lightest server gets.
	MaxWeight int `yaml:"max_weight" json:"max_weight"`
	// Aggregate reduces a series to one load: last, avg, max or median.
	Aggregate string `yaml:"aggregate" json:"aggregate"`
	// MaxAge: a series whose newest valid point is older counts as missing (0 = no limit).
	MaxAge duration.Duration `yaml:"max_age" json:"max_age"`
	// Missing says what to do with a server without valid data: keep or mean.
	Missing string `yaml:"missing" json:"missing"`
	// MinCoverage (0..1) is the share of servers that must have data, else the backend holds.
	MinCoverage float64 `yaml:"min_coverage" json:"min_coverage"`
	// Deadband: a weight change smaller than this is not written.
	Deadband int `yaml:"deadband" json:"deadband"`
	// MaxStep (> 1, 0 = off) is the largest factor by which one cycle may move
	// a server's share of the backend's weight (its share of new connections),
	// computed before rounding to integers: see shareOut.
	MaxStep float64 `yaml:"max_step" json:"max_step"`
	// MaxRun (>= 0, 0 = off) bounds how many new connections in a row one
	// server takes under leastconn before the lower median server takes
	// one: at most 1 + MaxRun, from the servers' open connections (HAProxy's
	// scur), so that a burst of clients does not all land on the server the
	// weights favour (maxrun.go; docs/research/production-world.md). It is one more
	// bound inside the share solver, beside max_step: where the two
	// conflict max_step holds and the run bound is reached over the
	// following cycles.
	MaxRun float64 `yaml:"max_run" json:"max_run"`
	// RunChurn (>= 0, 0 = off) raises the run bound's H, per cycle, to this
	// many times the new connections a server gains per cycle on average
	// (runAllowance in maxrun.go): backends of many short connections keep
	// the weights' reach, backends of rare long ones keep H at MaxRun.
	RunChurn float64 `yaml:"run_churn" json:"run_churn"`
	// RunRare (>= 0, 0 = off) tightens the run bound while new connections
	// are rare: once the servers' mean gain of connections per cycle (the
	// EWMA run_churn reads, measured for at least 30 cycles) is below it,
	// no server takes two new connections in a row before the
	// RunRareSpread-th most favoured server takes one, so a burst of
	// RunRareSpread clients lands on as many servers, and a server's
	// allowance loses what it gained since the last cycle (maxrun.go,
	// runState; docs/research/production-world.md). It applies only with
	// MaxRun > 0.
	RunRare float64 `yaml:"run_rare" json:"run_rare"`
	// RunRareSpread (>= 2) is how many servers a burst spreads over under
	// RunRare (never past the lower median server).
	RunRareSpread int `yaml:"run_rare_spread" json:"run_rare_spread"`
	// Smoothing is the half-life of the per-server EWMA of the load (0 = off).
	Smoothing duration.Duration `yaml:"smoothing" json:"smoothing"`
	// PanicThreshold (> 1, 0 = off): a raw load above this multiple of the mean
	// bypasses the smoothing at once.
	PanicThreshold float64 `yaml:"panic_threshold" json:"panic_threshold"`
	// DrainAbove is the absolute load above which a server gets weight 0 (0 = off).
	DrainAbove float64 `yaml:"drain_above" json:"drain_above"`
	// ResumeBelow is the load below which a drained server is weighted again.
	ResumeBelow float64 `yaml:"resume_below" json:"resume_below"`
	// MaxDrained (0..1) is the largest share of a backend's servers drained at once.
	MaxDrained float64 `yaml:"max_drained" json:"max_drained"`
	// ConnectionLife (0 = off) is the mean lifetime of the backend's connections.
	// When set, each server's load is turned into an estimate of its load per
	// open connection now, from the session counts the target reports every
	// cycle (ServerState.Sessions, HAProxy's scur): see estimatePerConnection.
	ConnectionLife duration.Duration `yaml:"connection_life" json:"connection_life"`
	// RateWindow is the window of the rate the source returns (the [20s] of a
	// PromQL rate), used with ConnectionLife to date the data; 0 = the gap
	// between the last two points.
	RateWindow duration.Duration `yaml:"rate_window" json:"rate_window"`
	// ManageOperatorStates lets the engine weight servers an operator set to drain or maint.
	ManageOperatorStates bool `yaml:"manage_operator_states" json:"manage_operator_states"`
}

// Names of the aggregations and missing-data modes a Policy accepts.
const (
	AggregateLast   = "last"
	AggregateAvg    = "avg"
	AggregateMax    = "max"
	AggregateMedian = "median"
	MissingKeep     = "keep"
	MissingMean     = "mean"
)

// DefaultPolicy returns the project defaults. It is the one place they live.
func DefaultPolicy() Policy {
	return Policy{
		Function:       "limited-proportions",
		LimitingFactor: 4,
		Aggressiveness: 1,
		Gain:           0.5,
		MaxWeight:      MaxWeight,
		Aggregate:      AggregateLast,
		MaxAge:         duration.Duration(5 * time.Minute),
		Missing:        MissingKeep,
		MinCoverage:    0.5,
		Deadband:       2,
		MaxStep:        2,
		MaxRun:         3, // the run bound against herding: docs/research/production-world.md
		RunRare:        0.1,
		RunRareSpread:  3,
		Smoothing:      0,
		PanicThreshold: 2,
		MaxDrained:     1.0 / 3,
	}
}

// Validate reports every invalid field, each message naming the field.
func (p Policy) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, field.Errorf(key, format, args...)) }
	if _, ok := Functions[p.Function]; !ok {
		add("function", "function %q is unknown, valid: %s", p.Function, strings.Join(FunctionNames(), ", "))
	}
	if !(p.LimitingFactor > 1) || isInf(p.LimitingFactor) {
		add("limiting_factor", "limiting_factor must be > 1, got %v", p.LimitingFactor)
	}
	if !(p.Aggressiveness > 0) || isInf(p.Aggressiveness) {
		add("aggressiveness", "aggressiveness must be > 0, got %v", p.Aggressiveness)
	}
	if !(p.Gain > 0) || isInf(p.Gain) {
		add("gain", "gain must be > 0, got %v", p.Gain)
	}
	if p.MaxWeight < 1 || p.MaxWeight > MaxWeight {
		add("max_weight", "max_weight must be in 1..%d, got %d", MaxWeight, p.MaxWeight)
	}
	if !slices.Contains(aggregateNames, p.Aggregate) {
		add("aggregate", "aggregate %q is unknown, valid: %s", p.Aggregate, strings.Join(aggregateNames, ", "))
	}
	if p.MaxAge < 0 {
		add("max_age", "max_age must be >= 0, got %v", p.MaxAge)
	}
	if p.Missing != MissingKeep && p.Missing != MissingMean {
		add("missing", "missing %q is unknown, valid: %s, %s", p.Missing, MissingKeep, MissingMean)
	}
	if !(p.MinCoverage >= 0 && p.MinCoverage <= 1) {
		add("min_coverage", "min_coverage must be in 0..1, got %v", p.MinCoverage)
	}
	if p.Deadband < 0 || p.Deadband > MaxWeight {
		add("deadband", "deadband must be in 0..%d, got %d", MaxWeight, p.Deadband)
	}
	if p.MaxStep != 0 && (!(p.MaxStep > 1) || isInf(p.MaxStep)) {
		add("max_step", "max_step must be > 1 (or 0 = off), got %v", p.MaxStep)
	}
	if !(p.MaxRun >= 0) || isInf(p.MaxRun) {
		add("max_run", "max_run must be >= 0 (0 = off), got %v", p.MaxRun)
	}
	if !(p.RunChurn >= 0) || isInf(p.RunChurn) {
		add("run_churn", "run_churn must be >= 0 (0 = off), got %v", p.RunChurn)
	}
	if !(p.RunRare >= 0) || isInf(p.RunRare) {
		add("run_rare", "run_rare must be >= 0 (0 = off), got %v", p.RunRare)
	}
	if p.RunRare > 0 && p.RunRareSpread < 2 {
		add("run_rare_spread", "run_rare_spread must be >= 2 while run_rare is on, got %d", p.RunRareSpread)
	}
	if p.Smoothing < 0 {
		add("smoothing", "smoothing must be >= 0, got %v", p.Smoothing)
	}
	if p.ConnectionLife < 0 {
		add("connection_life", "connection_life must be >= 0, got %v", p.ConnectionLife)
	}
	if p.RateWindow < 0 {
		add("rate_window", "rate_window must be >= 0, got %v", p.RateWindow)
	}
	if p.PanicThreshold != 0 && (!(p.PanicThreshold > 1) || isInf(p.PanicThreshold)) {
		add("panic_threshold", "panic_threshold must be > 1 (or 0 = off), got %v", p.PanicThreshold)
	}
	errs = append(errs, p.validateDrain()...)
	return errors.Join(errs...)
}

func (p Policy) validateDrain() []error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, field.Errorf(key, format, args...)) }
	if !(p.DrainAbove >= 0) || isInf(p.DrainAbove) {
		add("drain_above", "drain_above must be >= 0, got %v", p.DrainAbove)
	}
	if !(p.ResumeBelow >= 0) || isInf(p.ResumeBelow) {
		add("resume_below", "resume_below must be >= 0, got %v", p.ResumeBelow)
	}
	switch {
	case p.DrainAbove == 0 && p.ResumeBelow > 0:
		add("resume_below", "resume_below is set (%v) but drain_above is 0 (drain off)", p.ResumeBelow)
	case p.DrainAbove > 0 && !(p.ResumeBelow > 0 && p.ResumeBelow < p.DrainAbove):
		add("resume_below", "resume_below must be > 0 and < drain_above (%v), got %v", p.DrainAbove, p.ResumeBelow)
	}
	if !(p.MaxDrained >= 0 && p.MaxDrained < 1) {
		add("max_drained", "max_drained must be in 0..1 (1 excluded), got %v", p.MaxDrained)
	}
	return errs
}

func (p Policy) draining() bool { return p.DrainAbove > 0 }

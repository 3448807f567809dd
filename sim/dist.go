package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Validate reports whether the distribution's parameters make sense.
func (d Distribution) Validate() error {
	switch d.Kind {
	case "lognormal":
		if d.Median <= 0 || d.Sigma < 0 {
			return errors.New("rate: lognormal needs median > 0 and sigma >= 0")
		}
	case "pareto":
		if d.Min <= 0 || d.Alpha <= 0 {
			return errors.New("rate: pareto needs min > 0 and alpha > 0")
		}
	default:
		return fmt.Errorf("rate: unknown kind %q (want lognormal or pareto)", d.Kind)
	}
	if d.Cap < 0 {
		return errors.New("rate: cap must not be negative")
	}
	return nil
}

// sample draws one rate.
func (d Distribution) sample(rng *rand.Rand) float64 {
	var v float64
	switch d.Kind {
	case "pareto":
		v = d.Min / math.Pow(1-rng.Float64(), 1/d.Alpha)
	default:
		v = d.Median * math.Exp(d.Sigma*rng.NormFloat64())
	}
	if d.Cap > 0 && v > d.Cap {
		v = d.Cap
	}
	return v
}

// String describes the distribution as the table header shows it.
func (d Distribution) String() string {
	s := fmt.Sprintf("lognormal rates (median %g, sigma %g", d.Median, d.Sigma)
	if d.Kind == "pareto" {
		s = fmt.Sprintf("pareto rates (min %g, alpha %g", d.Min, d.Alpha)
	}
	if d.Cap > 0 {
		s += fmt.Sprintf(", cap %g", d.Cap)
	}
	return s + ")"
}

package sim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Validate reports the first setting of the scenario that cannot be simulated.
func (sc Scenario) Validate() error {
	switch {
	case sc.Servers < 1:
		return errors.New("scenario: servers must be at least 1")
	case sc.Connections < 1:
		return errors.New("scenario: connections must be at least 1")
	case sc.MeanLife <= 0:
		return errors.New("scenario: mean_life must be positive")
	case sc.Step <= 0 || sc.Duration < sc.Step:
		return errors.New("scenario: step must be positive and not longer than duration")
	case sc.Warmup < 0 || sc.Warmup >= sc.Duration:
		return errors.New("scenario: warmup must be shorter than duration")
	}
	for name, d := range map[string]time.Duration{
		"window": sc.Window, "resolution": sc.Resolution, "rate_window": sc.RateWindow,
		"interval": sc.Interval, "agent_every": sc.AgentEvery,
	} {
		if d < sc.Step || d%sc.Step != 0 {
			return fmt.Errorf("scenario: %s (%v) must be a multiple of step (%v)", name, d, sc.Step)
		}
	}
	if sc.Delay < 0 || sc.AgentCapacity <= 0 {
		return errors.New("scenario: delay must not be negative and agent_capacity must be positive")
	}
	if err := sc.Rate.Validate(); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	if err := sc.validateFleet(); err != nil {
		return err
	}
	if d := sc.Drift; d != nil && (!(d.Share >= 0 && d.Share <= 1) || !(d.Factor >= 1) || math.IsInf(d.Factor, 0)) {
		return errors.New("scenario: drift needs a share in 0..1 and a finite factor >= 1")
	}
	if d := sc.Drift; d != nil && d.To != 0 && (d.From < 0 || d.To <= d.From) {
		return errors.New("scenario: drift's from must not be negative and its to, when set, after from")
	}
	if sc.Ramp < 0 || sc.Ramp >= sc.Duration {
		return errors.New("scenario: ramp must not be negative and shorter than duration")
	}
	for i, c := range sc.Clients {
		n, err := strconv.Atoi(strings.TrimPrefix(c.Server, "s"))
		if !(c.Rate > 0) || math.IsInf(c.Rate, 0) || !strings.HasPrefix(c.Server, "s") || err != nil || n < 1 || n > sc.Servers {
			return fmt.Errorf("scenario: clients[%d]: want a positive rate and a server s1..s%d (got %g on %q)", i, sc.Servers, c.Rate, c.Server)
		}
	}
	for i, ev := range sc.Events {
		if err := ev.validate(sc); err != nil {
			return fmt.Errorf("scenario: event %d (%s): %w", i+1, ev.Kind, err)
		}
	}
	return nil
}

func (ev Event) validate(sc Scenario) error {
	if ev.At < 0 || ev.At >= sc.Duration {
		return errors.New("at must fall inside the duration")
	}
	switch ev.Kind {
	case EventWhale:
		if ev.Count < 1 || ev.Rate <= 0 || ev.Life <= 0 {
			return errors.New("whale needs count, rate and life")
		}
	case EventBurst:
		if ev.Count < 1 || ev.Rate <= 0 || ev.Life < 0 || ev.Over < 0 {
			return errors.New("burst needs count and rate, and a non-negative life and over")
		}
	case EventRestart:
		if ev.Balancer < 0 || ev.Balancer >= len(sc.shares()) || ev.Over < 0 {
			return fmt.Errorf("restart needs a balancer in 0..%d and a non-negative over", len(sc.shares())-1)
		}
	case EventAdd:
	case EventRemove:
		if ev.Server == "" {
			return errors.New("remove needs a server name (s1, s2, ...)")
		}
	case EventRamp:
		if ev.Factor <= 0 || ev.Over < 0 {
			return errors.New("ramp needs a positive factor and a non-negative over")
		}
	default:
		return fmt.Errorf("unknown kind (want %s, %s, %s, %s, %s or %s)", EventWhale, EventBurst, EventAdd, EventRemove, EventRamp, EventRestart)
	}
	return nil
}

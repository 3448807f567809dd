// Package assemble turns one configured backend into the weighter.Weigher
// whose cycles the daemon runs: its controller, its source (the fresh
// pipeline over the fast signal, or the configured source alone) and its
// shedder. The daemon and the simulator both assemble their backends here,
// from the parts each brings (the daemon real ones, the simulator its
// models), so the simulator's figures are the shipped daemon's, not those of
// a copy of its wiring (a test fails on a backend assembled by hand in
// either).
package assemble

import (
	"context"
	"fmt"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Parts are what a backend is assembled from besides its configuration.
type Parts struct {
	// Target is where the weights go (HAProxy's backend, an IPVS service, a model).
	Target weighter.Target
	// Source is the configured source, built: a metrics source that
	// calibrates the fast signal, or HAProxy's own counters that stand in
	// for it.
	Source weighter.Source
	// Fast reads the backend's fast signal; nil: the backend weighs by
	// Source alone (fast_signal off).
	Fast weighter.LocalReader
	// Peers adds the other balancers' readings to the fast signal; nil: none.
	Peers func(own weighter.LocalReader) weighter.LocalReader
	// Background answers a calibrating source outside the cycle (so a slow
	// metrics source cannot decide whether it may calibrate), asked every
	// refresh; nil: asked within the cycle.
	Background func(src weighter.Source, refresh time.Duration) weighter.Source
	// FirstWait, Now and Sleep are the fresh pipeline's (weighter.FreshConfig);
	// zero: its defaults (no wait, the wall clock).
	FirstWait time.Duration
	Now       func() time.Time
	Sleep     func(context.Context, time.Duration) error
}

// Research replaces what the configuration says, for the simulator's
// candidate pipelines; the daemon assembles with none.
type Research struct {
	// Settings changes the fresh pipeline's settings (calibration mode,
	// refresh, calibrating or not).
	Settings func(*weighter.FreshSettings)
	// Policy replaces the controller's policy; nil: the configuration's.
	Policy *weighter.Policy
	// Shed replaces the shedding policy; nil: the configuration's.
	Shed *weighter.ShedPolicy
	// Pin replaces the pinning policy and turns pinning on; nil: the
	// configuration's.
	Pin *weighter.PinPolicy
}

// Assembled is one backend, assembled.
type Assembled struct {
	// Backend is what weighter.RunCycle runs.
	Backend *weighter.Weigher
	// Fresh is the fresh pipeline over the fast signal (Backend.Source); nil
	// when the backend weighs by its source alone.
	Fresh *weighter.Fresh
	// External is what the fresh pipeline calibrates with, or falls back to:
	// Parts.Source, answered in the background when it calibrates.
	External weighter.Source
}

// Backend assembles b from p, as the configuration says.
func Backend(b config.Backend, p Parts) (Assembled, error) {
	return Candidate(b, p, Research{})
}

// Candidate assembles b from p with r replacing what the configuration says
// (the simulator's candidate pipelines).
func Candidate(b config.Backend, p Parts, r Research) (Assembled, error) {
	policy := b.Policy
	if r.Policy != nil {
		policy = *r.Policy
	}
	ctl, err := weighter.NewController(policy)
	if err != nil {
		return Assembled{}, err
	}
	out := Assembled{Backend: &weighter.Weigher{Name: b.Name, Controller: ctl, Target: p.Target, Source: p.Source}}
	shed, on := b.ShedPolicy()
	if r.Shed != nil {
		shed, on = *r.Shed, true
	}
	if on {
		if out.Backend.Shedder, err = weighter.NewShedder(shed); err != nil {
			return Assembled{}, err
		}
	}
	if out.Backend.Pinner, err = pinner(b, p, r); err != nil {
		return Assembled{}, err
	}
	if p.Fast == nil {
		return out, nil
	}
	settings := b.FreshSettings()
	if r.Settings != nil {
		r.Settings(&settings)
	}
	out.External = p.Source
	if settings.Calibrate && p.Background != nil {
		out.External = p.Background(p.Source, settings.Refresh)
	}
	fast := p.Fast
	if p.Peers != nil {
		fast = p.Peers(fast)
	}
	cfg := settings.Config(fast, out.External)
	cfg.FirstWait = p.FirstWait
	if p.Now != nil {
		cfg.Now = p.Now
	}
	if p.Sleep != nil {
		cfg.Sleep = p.Sleep
	}
	if out.Fresh, err = weighter.NewFresh(cfg); err != nil {
		return Assembled{}, fmt.Errorf("fast signal: %w", err)
	}
	out.Backend.Source = out.Fresh
	return out, nil
}

// pinner returns the backend's Pinner: for a backend that may pin (its
// configuration, or r.Pin) whose target has a pin table to write (an HAProxy
// backend; whether the table exists is the target's to say, each cycle),
// with a fast signal to learn the clients from. nil otherwise.
func pinner(b config.Backend, p Parts, r Research) (*weighter.Pinner, error) {
	mode, policy, _ := b.PinSettings()
	if r.Pin != nil {
		mode, policy = config.PinOn, *r.Pin
	}
	if _, ok := p.Target.(weighter.PinTarget); !ok || mode == config.PinOff || p.Fast == nil {
		return nil, nil
	}
	pn, err := weighter.NewPinner(policy)
	if err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	return pn, nil
}

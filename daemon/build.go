package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/lvs"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Unit is one configured backend, wired and ready to cycle.
type Unit struct {
	Backend *weighter.Backend
	// Kind is "haproxy" or "ipvs".
	Kind string
	// haproxy is set for HAProxy backends: start-up check, snapshot and restore.
	haproxy *haproxy.Backend
	ipvs    *lvs.Service
	// source and socket are what Source was built from, so that a reload
	// can tell whether it may keep the running Source (and its state).
	source config.Source
	socket haproxy.Config
	// checked is set once Check has passed (StartCheck, startcheck.go).
	checked atomic.Bool
}

// Check verifies at start that the target exists and accepts runtime weights.
func (u *Unit) Check(ctx context.Context) error {
	switch {
	case u.haproxy != nil:
		return u.haproxy.Check(ctx)
	case u.ipvs != nil:
		return u.ipvs.Check(ctx)
	}
	return nil
}

// Close releases what the unit holds (the IPVS netlink connection).
func (u *Unit) Close() error {
	if u.ipvs != nil {
		return u.ipvs.Close()
	}
	return nil
}

// Build turns a validated configuration into units, one per backend. It does
// not talk to HAProxy (each call dials); an IPVS service is opened and checked.
func Build(cfg *config.Config, log *slog.Logger) ([]*Unit, error) {
	var client *haproxy.Client
	var units []*Unit
	for _, b := range cfg.Backends {
		if client == nil && (b.IPVS == nil || b.Source.HAProxy != nil) {
			c, err := haproxy.New(cfg.HAProxy)
			if err != nil {
				closeAll(units) // IPVS services opened for earlier backends
				return nil, fmt.Errorf("haproxy: %w", err)
			}
			client = c
		}
		u, err := buildUnit(b, client, log.With("backend", b.Name))
		if err != nil {
			closeAll(units)
			return nil, fmt.Errorf("backend %s: %w", b.Name, err)
		}
		u.source, u.socket = b.Source, cfg.HAProxy
		units = append(units, u)
	}
	return units, nil
}

func buildUnit(b config.Backend, client *haproxy.Client, log *slog.Logger) (*Unit, error) {
	ctl, err := weighter.NewController(b.Policy)
	if err != nil {
		return nil, err
	}
	u := &Unit{Backend: &weighter.Backend{Name: b.Name, Controller: ctl}}
	if b.IPVS != nil {
		svc, err := lvs.New(*b.IPVS, log)
		if err != nil {
			return nil, err
		}
		u.Kind, u.ipvs, u.Backend.Target = "ipvs", svc, svc
	} else {
		hb := client.Backend(b.Name)
		u.Kind, u.haproxy, u.Backend.Target = "haproxy", hb, hb
	}
	src, err := buildSource(b, u.haproxy, log)
	if err != nil {
		u.Close()
		return nil, err
	}
	u.Backend.Source = src
	return u, nil
}

// buildSource builds the backend's source. HAProxy's own statistics are read
// through the backend's target, so the one `show stat` of a cycle serves both.
func buildSource(b config.Backend, target *haproxy.Backend, log *slog.Logger) (weighter.Source, error) {
	s := b.Source
	switch {
	case s.Prometheus != nil:
		return sources.NewPrometheus(*s.Prometheus, log)
	case s.Graphite != nil:
		return sources.NewGraphite(*s.Graphite, log)
	case s.HAProxy != nil:
		if target == nil {
			return nil, errors.New("source haproxy: HAProxy statistics need an HAProxy backend")
		}
		return haproxy.NewStatsSource(*s.HAProxy, b.Name, target, log)
	}
	return nil, errors.New("no source configured")
}

func closeAll(units []*Unit) {
	for _, u := range units {
		u.Close()
	}
}

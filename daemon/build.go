package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync/atomic"

	"github.com/haproxy-weighter/haproxy-weighter/assemble"
	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/fastsignal"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/lvs"
	"github.com/haproxy-weighter/haproxy-weighter/peers"
	"github.com/haproxy-weighter/haproxy-weighter/sourcekind"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// managedBackend is one configured backend as the daemon runs it: its
// Weigher, wired and ready to cycle, and what the daemon keeps of its parts
// (for reloads, the start log, the status page).
type managedBackend struct {
	Backend *weighter.Weigher
	// Kind is "haproxy" or "ipvs".
	Kind string
	// target is Backend.Target as built, before any decorator: what it can
	// do besides weights (a start check, closing) it says by implementing
	// checker and io.Closer.
	target weighter.Target
	// source and socket are what Source was built from, so that a reload
	// can tell whether it may keep the running Source (and its state).
	source config.Source
	socket haproxy.Config
	// client is the HAProxy client of socket, shared by every unit on the
	// same socket (nil when the unit does not talk to HAProxy).
	client *haproxy.Client
	// address is the source's wrapper that matches series to servers by
	// address (match: address; address.go), nil when matched by name.
	address *addressSource
	// checked is set once Check has passed (StartCheck, startcheck.go).
	checked atomic.Bool
	// fast is set when the backend weighs by HAProxy's fast signal: its
	// Source is then fast.fresh, which calibrates with (or falls back to)
	// the configured source.
	fast *fastUnit
	// fastOff says why an HAProxy backend does not read the fast signal.
	fastOff string
	// dryRun: the backend's cycles plan and export, and apply nothing.
	dryRun bool
	// pinNotes say what keeps the backend's clients from being measured
	// for pinning (pins.go), said once it pins.
	pinNotes []pinNote
}

// checker is a target that can verify at start that it exists and accepts
// runtime weights (haproxy.RuntimeBackend, lvs.Service).
type checker interface {
	Check(ctx context.Context) error
}

// Check verifies at start that the target exists and accepts runtime weights.
func (u *managedBackend) Check(ctx context.Context) error {
	if c, ok := u.target.(checker); ok {
		return c.Check(ctx)
	}
	return nil
}

// Close releases what the unit holds (the IPVS netlink connection).
func (u *managedBackend) Close() error {
	if c, ok := u.target.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Build turns a validated configuration into units, one per backend. It does
// not talk to HAProxy (each call dials); an IPVS service is opened and checked.
func Build(cfg *config.Config, log *slog.Logger) ([]*managedBackend, error) {
	return build(cfg, log, buildOptions{})
}

func build(cfg *config.Config, log *slog.Logger, o buildOptions) ([]*managedBackend, error) {
	if o.peers != nil {
		if err := peers.CheckClient(cfg); err != nil {
			return nil, err
		}
	}
	if o.zeroes == nil {
		o.zeroes = &ownzero.Record{} // built alone (Build, tests): a record of their own
	}
	clients := clientPool{}
	maps.Copy(clients, o.clients)
	var units []*managedBackend
	for _, b := range cfg.Backends {
		var client *haproxy.Client
		if b.UsesSocket() {
			c, err := clients.get(cfg.SocketOf(&b), o.zeroes)
			if err != nil {
				closeAll(units) // IPVS services opened for earlier backends
				return nil, fmt.Errorf("backend %s: haproxy: %w", b.Name, err)
			}
			client = c
		}
		bo := o
		bo.master = client != nil && cfg.SocketOf(&b).Master
		var notes []pinNote
		if client != nil {
			bo.listeners, notes = pinListeners(b, cfg.SocketOf(&b))
			if mode, _, _ := b.PinSettings(); mode == config.PinOn {
				for _, n := range notes { // configured to pin: said at start
					n.say(log, slog.LevelWarn, "backend", b.Name)
				}
			}
		}
		u, err := buildUnit(b, client, log.With("backend", b.Name), bo)
		if err != nil {
			closeAll(units)
			return nil, fmt.Errorf("backend %s: %w", b.Name, err)
		}
		u.source, u.dryRun, u.pinNotes = b.Source, b.DryRun, notes
		if client != nil {
			u.socket, u.client = cfg.SocketOf(&b), client
		}
		units = append(units, u)
	}
	return units, nil
}

func buildUnit(b config.Backend, client *haproxy.Client, log *slog.Logger, o buildOptions) (*managedBackend, error) {
	u := &managedBackend{}
	var stats haproxy.StatsReader // nil, not a nil *haproxy.RuntimeBackend, for IPVS
	var hb *haproxy.RuntimeBackend
	var svc *lvs.Service
	if b.IPVS != nil {
		var err error
		if svc, err = lvs.New(*b.IPVS, o.zeroes, log); err != nil {
			return nil, err
		}
		u.Kind, u.target = "ipvs", svc
	} else {
		hb = client.Backend(b.Name)
		u.Kind, u.target, stats = "haproxy", hb, hb
	}
	// HAProxy's own statistics are read through the backend's target, so the
	// one `show stat` of a cycle serves both.
	src, err := sourcekind.Build(b.Source, sourcekind.Env{Backend: b.Name, Stats: stats, Log: log})
	if err != nil {
		u.Close()
		return nil, err
	}
	if hb != nil && b.MatchesAddress() {
		// Renamed from addresses to servers before anything uses the loads.
		u.address = newAddressSource(src, log)
		src = u.address
	}
	parts := assemble.Parts{Target: u.target, Source: src, FirstWait: o.firstWait, Background: fastsignal.AnswerInBackground}
	var chain *fastsignal.Chain
	on, why := b.FastSignalState()
	switch {
	case hb != nil && !on:
		u.fastOff = why
	case hb != nil:
		chain = fastsignal.NewHAProxyChainWith(hb, client, o.master, b.FastBytes(), log,
			fastsignal.ChainOptions{Listeners: o.listeners}).Pinned(b.FastSignal)
		parts.Fast = chain
		if o.peers != nil {
			parts.Peers = func(own weighter.LocalReader) weighter.LocalReader { return peers.NewReader(own, b.Name, o.peers) }
		}
	case on: // IPVS: the kernel's live connection counts, calibrated by the source
		parts.Fast = svc
	}
	a, err := assemble.Backend(b, parts)
	if err != nil {
		u.Close()
		return nil, err
	}
	u.Backend = a.Backend
	if a.Fresh != nil {
		u.fast = newFastUnit(b, a.Fresh, chain, src)
		u.fast.listeners = o.listeners
	}
	askOpenStreams(u)
	return u, nil
}

func closeAll(units []*managedBackend) {
	for _, u := range units {
		u.Close()
	}
}

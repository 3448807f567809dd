package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/fastsignal"
	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/peers"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// fastUnit is what a unit that weighs by the fast signal keeps besides its
// Source (the Fresh): its parts, so that a reload can keep them and point
// them at the new target, and what the start log says.
type fastUnit struct {
	fresh *weighter.Fresh
	// chain is an HAProxy backend's readers (package fastsignal); nil for
	// IPVS's counts.
	chain *fastsignal.Chain
	// listeners are those the chain lists the clients on (pins.go): a
	// reload that changes them builds a new chain.
	listeners []netip.AddrPort
	external  weighter.Source // the configured source, which Fresh calibrates with (or falls back to)
	// settings is what the Fresh was built from besides the source.
	settings fastSettings
	// window is how the calibration window was found.
	window string
	kind   string
	// calibration is the policy when the source calibrates (nil: fast alone).
	calibration *unitCalibration
}

// fastSettings are a backend's keys that shape its Fresh source.
type fastSettings struct {
	signal      string
	calibration config.Calibration
}

// buildOptions change how Build wires units.
type buildOptions struct {
	// firstWait makes a unit's first fast read wait this long for a second
	// one: a single cycle (once) has no earlier read to take a rate from.
	firstWait time.Duration
	// peers, when set, adds the other balancers' readings to each backend's
	// fast signal (package peers).
	peers *peers.Set
	// clients are the clients a reload keeps (sockets.go).
	clients clientPool
	// master: the backend's socket is HAProxy's master CLI (set per
	// backend by build).
	master bool
	// zeroes is the record of the weight-0 drains this process made, which
	// the daemon owns and every HAProxy client and IPVS service it builds
	// shares: a reload builds new ones while the old ones restore. nil: one
	// of the build's own.
	zeroes *ownzero.Record
	// listeners are where the backend's clients connect (set per backend
	// by build; pins.go): the fast signal lists them for pinning.
	listeners []netip.AddrPort
}

// newFastUnit keeps what the daemon needs of a backend assembled with the
// fast signal besides its cycle: the fresh pipeline, the HAProxy reader
// chain (nil for IPVS's counts), the configured source and, for the start
// log, how the calibration window was found.
func newFastUnit(b config.Backend, fresh *weighter.Fresh, chain *fastsignal.Chain, src weighter.Source) *fastUnit {
	policy, w := b.CalibrationPolicy()
	how := w.How
	if !w.FromStep {
		how = fmt.Sprintf("%s (%s)", w.Span, w.How)
	}
	f := &fastUnit{fresh: fresh, chain: chain, external: src, window: how, kind: b.Source.Kind(),
		settings: fastSettings{signal: b.FastSignal, calibration: b.Calibration}}
	if b.Calibrates() {
		f.calibration = &unitCalibration{policy: policy, assumed: w.Assumed}
	}
	return f
}

// primeFast reads the fast signal once at start, so that the first cycle
// has a rate, and says in one line how the backend is weighted: by the
// fast signal and how it is calibrated, or, when the signal cannot be read,
// by the external source alone and why. It returns the fast state.
// Said already by the runner a reload replaced (said), it logs at debug.
func (u *managedBackend) primeFast(ctx context.Context, servers []weighter.ServerState, log *slog.Logger, said startSaid) weighter.FastState {
	f := u.fast
	if f == nil {
		return weighter.FastOff
	}
	dead, live := slog.LevelWarn, slog.LevelInfo
	if said.fastDead {
		dead = slog.LevelDebug
	}
	if said.fastKept {
		live = slog.LevelDebug
	}
	if err := f.fresh.Prime(ctx, servers); err != nil {
		how := "the kernel's socket table, show sess all, show stat"
		if f.chain == nil {
			how = "IPVS connection counts"
		}
		log.Log(ctx, dead, "fast signal cannot be read", "reader", "none", "tried", how, "source", f.kind,
			"effect", "weighting by the source alone until it can", "err", err)
		return weighter.FastDead
	}
	state, reason := f.fresh.State()
	if state == weighter.FastDead {
		log.Log(ctx, dead, "fast signal dead", "source", f.kind, "fast_reason", reason, "effect", "weighting by the source alone until it moves")
		return state
	}
	read := f.readAttrs()
	p := f.calibration
	if p == nil {
		log.Log(ctx, live, "weighting by the fast signal", append(read, "signal", "HAProxy bytes per connection", "fallback", f.kind)...)
		f.warnRootUID(ctx, log, said)
		return state
	}
	level := live
	if p.assumed && !said.fastKept {
		level = slog.LevelWarn
	}
	signal := "HAProxy bytes per connection × a per-server calibration from the source"
	if f.chain == nil {
		signal = "IPVS live connection counts × each server's load per connection from the source"
	}
	log.Log(ctx, level, "weighting by the calibrated fast signal", append(read, "signal", signal, "source", f.kind, "window", f.window, "half_life", p.policy.HalfLife, "hold", p.policy.Hold,
		"max_factor", p.policy.MaxFactor, "refresh", f.settings.calibration.Refresh)...)
	f.warnRootUID(ctx, log, said)
	return state
}

// warnRootUID says once, at start, that the socket table tells HAProxy's
// sockets from others' by uid 0 (fastsignal.Chain.WarnRootUID): a warning,
// at debug when a reload kept the fast signal.
func (f *fastUnit) warnRootUID(ctx context.Context, log *slog.Logger, said startSaid) {
	if f.chain == nil {
		return
	}
	level := slog.LevelWarn
	if said.fastKept {
		level = slog.LevelDebug
	}
	f.chain.WarnRootUID(ctx, log, level)
}

// readAttrs say, for the start log, which reader the fast signal reads and,
// for the socket table, how it tells HAProxy's sockets from others' (and
// why not more precisely).
func (f *fastUnit) readAttrs() []any {
	if f.chain == nil {
		return nil
	}
	return f.chain.StartAttrs()
}

// unitCalibration is a calibrating unit's policy, for the start log.
type unitCalibration struct {
	policy  weighter.CalibrationPolicy
	assumed bool // the window is DefaultCalibrationWindow because nothing said it
}

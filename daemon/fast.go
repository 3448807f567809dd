package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/peers"
	"github.com/haproxy-weighter/haproxy-weighter/sockdiag"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// localReader reads an HAProxy backend's fast local signal for the weighter.
// A reload that keeps the unit's source keeps the reader too, on the old
// client: the client holds the per-stream sums the counters are made of.
type localReader struct {
	counter string
	b       *haproxy.Backend
	// open asks for the open streams with their rates, which only the shed
	// planner uses; set from the backend's shed block at build and reload.
	open atomic.Bool
	// next is when the reader's next read can be a new dump of HAProxy (unix
	// ns): the runner's first cycle waits for it, so that it has a rate.
	next atomic.Int64
}

var _ weighter.LocalReader = (*localReader)(nil)

func newLocalReader(b *haproxy.Backend, dir weighter.Bytes) *localReader {
	counter := haproxy.LocalBoth
	switch dir {
	case weighter.BytesIn:
		counter = haproxy.CounterBytesIn
	case weighter.BytesOut:
		counter = haproxy.CounterBytesOut
	}
	return &localReader{counter: counter, b: b}
}

// ReadLocal reads the signal of the servers from the newest `show sess
// all` of the backend's HAProxy.
func (r *localReader) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	got, err := r.b.ReadLocal(ctx, haproxy.LocalQuery{Counter: r.counter, Servers: weighter.Names(servers), Open: r.open.Load()})
	if err != nil {
		return weighter.LocalRead{}, err
	}
	r.next.Store(got.Next.UnixNano())
	return got.LocalRead, nil
}

// nextRead is when a read can next see a new dump of HAProxy (zero before
// the first read): reads before it return the same counters, no rate.
func (r *localReader) nextRead() time.Time {
	if n := r.next.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// fastUnit is what a unit that weighs by the fast signal keeps besides its
// Source (the Fresh): its parts, so that a reload can keep them and point
// them at the new target, and what the start log says.
type fastUnit struct {
	fresh *weighter.Fresh
	// chain is an HAProxy backend's readers (kernelfast.go), local its
	// show sess all reader; both nil for IPVS's counts.
	chain    *fastChain
	local    *localReader
	external weighter.Source // the configured source, which Fresh calibrates with (or falls back to)
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

// minAsyncTimeout bounds a background fetch of the calibrating source from
// below: a refresh set shorter than a slow source's answer must not cut it.
const minAsyncTimeout = 10 * time.Second

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
}

// newHAProxyFast builds an HAProxy backend's fast signal: the chain of
// readers, the kernel's socket table first.
func newHAProxyFast(hb *haproxy.Backend, c *haproxy.Client, master bool, dir weighter.Bytes, log *slog.Logger) *fastChain {
	return newFastChain(hb.Name(), newKernelReader(hb, c, master, dir, log), newLocalReader(hb, dir), &statReader{hb: hb, bytes: dir}, log)
}

// answerInBackground has a calibrating metrics source answer in the
// background (asyncSource), asked every refresh: the 2 s cycle must not
// decide whether it may calibrate.
func answerInBackground(src weighter.Source, refresh time.Duration) weighter.Source {
	return newAsyncSource(src, max(refresh, minAsyncTimeout))
}

// newFastUnit keeps what the daemon needs of a backend assembled with the
// fast signal besides its cycle: the fresh pipeline, the HAProxy reader
// chain (nil for IPVS's counts), the configured source and, for the start
// log, how the calibration window was found.
func newFastUnit(b config.Backend, fresh *weighter.Fresh, chain *fastChain, src weighter.Source) *fastUnit {
	policy, w := b.CalibrationPolicy()
	how := w.How
	if !w.FromStep {
		how = fmt.Sprintf("%s (%s)", w.Span, w.How)
	}
	f := &fastUnit{fresh: fresh, chain: chain, external: src, window: how, kind: b.Source.Kind(),
		settings: fastSettings{signal: b.FastSignal, calibration: b.Calibration}}
	if chain != nil {
		f.local = chain.sessions
	}
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
		if f.local == nil {
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
	if f.local == nil {
		signal = "IPVS live connection counts × each server's load per connection from the source"
	}
	log.Log(ctx, level, "weighting by the calibrated fast signal", append(read, "signal", signal, "source", f.kind, "window", f.window, "half_life", p.policy.HalfLife, "hold", p.policy.Hold,
		"max_factor", p.policy.MaxFactor, "refresh", f.settings.calibration.Refresh)...)
	f.warnRootUID(ctx, log, said)
	return state
}

// warnRootUID says once, at start, that the socket table tells HAProxy's
// sockets from others' by uid 0: every root process's connections to the
// servers (a health checker, a monitoring probe, an operator's curl) are
// then counted as HAProxy's load (measured: 389 kB/s and 7 sessions read
// for a server carrying 4.7 kB/s and 5), and how to make it exact.
func (f *fastUnit) warnRootUID(ctx context.Context, log *slog.Logger, said startSaid) {
	if f.chain == nil || f.chain.kernel == nil || f.chain.reader() != readerKernel {
		return
	}
	own, why := f.chain.kernel.owner()
	if own != sockdiag.OwnerUID || !slices.Contains(f.chain.kernel.ownerUIDs(), 0) {
		return
	}
	level := slog.LevelWarn
	if said.fastKept {
		level = slog.LevelDebug
	}
	log.Log(ctx, level, "socket table counts root's connections as HAProxy's",
		"ownership", own, "ownership_uid", 0, "ownership_why", why,
		"effect", "HAProxy runs as root and its sockets are told from other processes' by uid 0, so every root process's connections to the servers count as HAProxy's load",
		"fix", "let the daemon read HAProxy's descriptors (run it as root, or give it CAP_SYS_PTRACE) or run HAProxy as a user of its own (global: user haproxy)")
}

// readAttrs say, for the start log, which reader the fast signal reads and,
// for the socket table, how it tells HAProxy's sockets from others' (and
// why not more precisely).
func (f *fastUnit) readAttrs() []any {
	if f.chain == nil {
		return nil
	}
	reader := f.chain.reader()
	out := []any{"reader", reader}
	if reader == readerKernel {
		own, why := f.chain.kernel.owner()
		out = append(out, "ownership", own)
		if uids := f.chain.kernel.ownerUIDs(); len(uids) > 0 {
			out = append(out, "ownership_uid", uidNames(uids))
		}
		if why != "" {
			out = append(out, "ownership_why", why)
		}
	}
	return out
}

// unitCalibration is a calibrating unit's policy, for the start log.
type unitCalibration struct {
	policy  weighter.CalibrationPolicy
	assumed bool // the window is DefaultCalibrationWindow because nothing said it
}

// ownerUIDs are the uids the last read told HAProxy's sockets by (none
// unless its ownership is uid).
func (k *kernelReader) ownerUIDs() []uint32 {
	return k.local.Last().UIDs
}

// uidNames writes uids with their user names where this host knows them:
// "0 (root)", "108 (haproxy)", comma-separated.
func uidNames(uids []uint32) string {
	parts := make([]string, len(uids))
	for i, uid := range uids {
		id := strconv.FormatUint(uint64(uid), 10)
		parts[i] = id
		if u, err := user.LookupId(id); err == nil && u.Username != "" {
			parts[i] += " (" + u.Username + ")"
		}
	}
	return strings.Join(parts, ", ")
}

package daemon

import (
	"context"
	"reflect"
	"slices"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
)

// minReloadSpacing is the least time from the end of a reload to the start
// of the next. A burst of SIGHUPs (a configuration management run that
// sends one per file it changed, a script in a loop) was applied one by one:
// at each a rebuild, the start checks and reads of every backend's HAProxy.
// Within the spacing they are applied together, once, when it has passed:
// the configuration in force after the burst is the last one, in at most a
// second. The backends' cycles keep their own schedule across reloads
// (runner.inheritSchedule), whatever the spacing.
const minReloadSpacing = time.Second

// reloadQueue coalesces reload requests: the first after a quiet spell is
// applied at once, the next ones wait for the spacing since the last reload
// ended and are applied together. Only Run's goroutine uses it.
type reloadQueue struct {
	spacing time.Duration
	last    time.Time   // when the last reload ended (zero: none yet)
	pending int         // requests not applied yet
	timer   *time.Timer // set while requests wait for the spacing to pass
}

// request records a reload request at now and reports whether to apply it
// now; if not, due fires when the spacing has passed.
func (q *reloadQueue) request(now time.Time) bool {
	q.pending++
	if q.timer != nil {
		return false
	}
	wait := q.spacing - now.Sub(q.last)
	if q.last.IsZero() || wait <= 0 {
		return true
	}
	q.timer = time.NewTimer(wait)
	return false
}

// due fires when waiting requests may be applied (nil channel: none wait).
func (q *reloadQueue) due() <-chan time.Time {
	if q.timer == nil {
		return nil
	}
	return q.timer.C
}

// take returns how many requests the reload about to be applied answers.
func (q *reloadQueue) take() int {
	n := q.pending
	q.pending = 0
	q.stop()
	return n
}

// applied records that a reload ended at now.
func (q *reloadQueue) applied(now time.Time) { q.last = now }

func (q *reloadQueue) stop() {
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
}

// reloadConfig replaces the configuration, or keeps the old one in force
// when the new one does not load or build. requests is how many reload
// requests (SIGHUPs) this one reload answers: more than one when a burst
// was coalesced, which the log says.
func (d *Daemon) reloadConfig(ctx context.Context, requests int) {
	if d.reload == nil {
		return
	}
	cfg, err := d.reload()
	var units []*managedBackend
	if err == nil {
		units, err = build(cfg, d.log, buildOptions{peers: d.peers, clients: d.current().clients(), zeroes: d.zeroes})
	}
	if err != nil {
		d.log.Error("config reload rejected", append([]any{"err", err, "effect", "keeping the old configuration"}, coalesced(requests)...)...)
		d.metrics.SetReloadSuccess(false)
		return
	}
	old := d.config()
	if cfg.Listen != old.Listen {
		d.log.Warn("listen address changes need a restart", "listen", old.Listen)
		cfg.Listen = old.Listen // where it serves, until then
	}
	if cfg.WebConfigFile != old.WebConfigFile {
		d.log.Warn("web_config_file changes need a restart", "web_config_file", old.WebConfigFile, "effect", "the file's content is read at each request")
		cfg.WebConfigFile = old.WebConfigFile
	}
	if err := CheckWebConfig(cfg.WebConfigFile); err != nil && old.Listen != "" {
		// The listener reads it at each request: nothing to keep or reject
		// here, but the operator who edited it must learn it is broken.
		d.log.Error("web configuration file broken", "err", err, "effect", "every request to the HTTP endpoints fails until it is fixed")
	}
	prev := d.current()
	stuck := prev.stop()
	// A stuck runner may still use its Controller and Source: its backend starts afresh.
	keepControllers(slices.DeleteFunc(slices.Clone(prev.units), func(u *managedBackend) bool {
		return slices.Contains(stuck, u.Backend.Name)
	}), units)
	inheritStuckShedders(prev.units, stuck, units)
	removed := d.forgetRemoved(old, cfg, stuck)
	if old.RestoreOnExit {
		// The daemon lets go of a backend the reload removed: with
		// restore_on_exit its weights (drains included) must not outlive that
		// either. Its runner has stopped, so nothing writes there any more.
		// A failure is logged; the daemon goes on with the new configuration.
		_ = d.startWeights.restore(ctx, old.CycleTimeout(), removed, "restore of a backend removed by the reload")
		moved := movedSocket(prev.units, units, stuck)
		_ = d.startWeights.restore(ctx, old.CycleTimeout(), moved, "restore of a backend the reload moved to another HAProxy socket")
		// Put back or not, the first HAProxy's weights are not the ones to
		// restore any more: the new socket's are kept at its first read.
		d.startWeights.forget(moved)
	}
	d.restoreTurnedDry(ctx, old, cfg, stuck)
	if old.RestoreOnExit && !cfg.RestoreOnExit {
		// Turned on again later, it keeps the weights of that moment: the
		// ones kept before must not be written back at exit.
		d.startWeights.forget(d.startWeights.names())
	}
	d.mu.Lock()
	d.cfg = cfg
	d.mu.Unlock()
	d.startPeers(ctx, cfg)
	d.warnHAProxyConfig(cfg)
	d.start(ctx, units, prev)
	d.log.Info("config reloaded", append([]any{"backends", len(cfg.Backends)}, coalesced(requests)...)...)
	d.metrics.SetReloadSuccess(true)
}

// forgetRemoved drops the series of the backends of old that next no longer
// has, and returns those whose runner stopped: a stuck one may still write.
func (d *Daemon) forgetRemoved(old, next *config.Config, stuck []string) (removed []string) {
	for _, b := range old.Backends {
		if !slices.ContainsFunc(next.Backends, func(n config.Backend) bool { return n.Name == b.Name }) {
			d.metrics.Forget(b.Name)
			if !slices.Contains(stuck, b.Name) {
				removed = append(removed, b.Name)
			}
		}
	}
	return removed
}

// movedSocket returns the backends of old whose runner stopped that next
// weights through another HAProxy socket: the daemon lets go of them on the
// first HAProxy as it does of one the reload removed.
func movedSocket(old, next []*managedBackend, stuck []string) []string {
	var moved []string
	for _, o := range old {
		for _, u := range next {
			if u.Backend.Name == o.Backend.Name && o.client != nil && o.socket.Socket != u.socket.Socket && !slices.Contains(stuck, o.Backend.Name) {
				moved = append(moved, o.Backend.Name)
			}
		}
	}
	return moved
}

// keepControllers hands each backend whose target kind, socket and policy a
// reload left unchanged its old Controller, so the daemon does not forget what
// it wrote and drained: a weight 0 it set would otherwise look like an operator's drain and
// stay, and a weight reset behind its back would no longer be re-applied. A
// backend whose source a reload left unchanged keeps its old Source too: the
// HAProxy stats source would otherwise forget its reads and hold the weights
// for a whole rate_window. The old runners have stopped, so nothing else uses
// the old Controllers and Sources.
func keepControllers(old, next []*managedBackend) {
	prev := make(map[string]*managedBackend, len(old))
	for _, u := range old {
		prev[u.Backend.Name] = u
	}
	for _, u := range next {
		o, ok := prev[u.Backend.Name]
		// What was written to one HAProxy says nothing of another's: a
		// backend moved to another socket starts afresh, or a weight 0 its
		// operator set there would be taken for the daemon's drain here.
		if ok && o.Kind == u.Kind && o.socket.Socket == u.socket.Socket && o.Backend.Controller.Policy() == u.Backend.Controller.Policy() {
			u.Backend.Controller = o.Backend.Controller
		}
		if ok {
			keepShedder(o, u)
		}
		if ok && o.socket.Socket == u.socket.Socket {
			keepPinner(o, u) // the pins it wants are in that HAProxy's table
		}
		if ok && sameSource(o, u) {
			u.Backend.Source, u.fast, u.address = o.Backend.Source, o.fast, o.address
			askOpenStreams(u) // the kept reader, for the new shed block
			hb, isHAProxy := u.target.(*haproxy.RuntimeBackend)
			src := u.Backend.Source
			if u.fast != nil {
				// The fast reader stays on the old client (same socket): its
				// per-stream sums go on, where a new one would start from
				// nothing and weigh by the source alone for a cycle.
				src = u.fast.external
			}
			if r, ok := src.(readsThrough); ok && isHAProxy {
				r.ReadThrough(hb)
			}
		}
	}
}

// readsThrough is a source that reads through its backend's target (the
// HAProxy stats source, which takes the target's `show stat` of the cycle). A
// kept one must read through the new target.
type readsThrough interface {
	ReadThrough(haproxy.StatsReader)
}

// sameSource reports whether a and b were built from the same source
// configuration, fast signal settings included (and, for a source that
// reads HAProxy, the same socket). Units
// not built by Build never match.
func sameSource(a, b *managedBackend) bool {
	if a.source.Kind() == "" || !reflect.DeepEqual(a.source, b.source) || (a.address == nil) != (b.address == nil) {
		return false
	}
	// The fast signal and its calibration are part of the source: a unit
	// that gains or loses it, or changes its settings, starts afresh.
	if (a.fast == nil) != (b.fast == nil) || (a.fast != nil && (a.fast.settings != b.fast.settings || !slices.Equal(a.fast.listeners, b.fast.listeners))) {
		return false
	}
	if a.fast != nil && a.fast.chain == nil {
		// IPVS's counts are read through the old unit's netlink connection,
		// which the reload closes: the new unit starts its fast state afresh.
		return false
	}
	return !(a.source.NeedsHAProxy() || a.fast != nil) || a.socket == b.socket
}

// coalesced is the log attribute that says a reload answered several
// requests: "coalesced_requests=N" (none for one).
func coalesced(requests int) []any {
	if requests <= 1 {
		return nil
	}
	return []any{"coalesced_requests", requests}
}

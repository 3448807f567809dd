// Package daemon runs haproxy-weighter as a service: it wires the configuration
// to sources and targets, cycles every backend on its own schedule, serves
// /metrics, /healthz and /readyz, reloads on SIGHUP and talks to systemd.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/metrics"
)

// Options are the daemon's collaborators; zero values pick the real ones.
type Options struct {
	Log *slog.Logger
	// Reload re-reads the configuration on SIGHUP; nil makes SIGHUP a no-op.
	Reload   func() (*config.Config, error)
	Notifier Notifier
	Clock    Clock
	Registry *prometheus.Registry
}

// Daemon is the long-running weighter.
type Daemon struct {
	cfg      *config.Config
	reload   func() (*config.Config, error)
	log      *slog.Logger
	notifier Notifier
	clock    Clock
	reg      *prometheus.Registry
	metrics  *metrics.Metrics

	// grace is how long stop waits, beyond a cycle timeout, for a backend's
	// loop to end before it gives up on it.
	grace time.Duration

	mu        sync.Mutex
	group     *group
	snapshots map[string]*haproxy.Backend // weights read at start, for restore_on_exit
}

// New returns a daemon for a validated configuration.
func New(cfg *config.Config, o Options) *Daemon {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Notifier == nil {
		o.Notifier = SystemdNotifier{Log: o.Log}
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	return &Daemon{cfg: cfg, reload: o.Reload, log: o.Log, notifier: o.Notifier, clock: o.Clock,
		reg: o.Registry, metrics: metrics.New(o.Registry), grace: 5 * time.Second,
		snapshots: map[string]*haproxy.Backend{}}
}

// Run starts every backend and blocks until ctx ends; then it stops the
// cycles and restores the start-up weights if configured. It returns an error
// when a restore failed, so that the process exits non-zero: a supervisor or
// operator must learn that HAProxy kept the daemon's weights (drains
// included) after it stopped. A value on hup reloads the configuration.
func (d *Daemon) Run(ctx context.Context, hup <-chan os.Signal) error {
	units, err := Build(d.cfg, d.log)
	if err != nil {
		return err
	}
	d.metrics.SetReloadSuccess(true)
	if d.cfg.Listen != "" {
		stop, err := d.serve(ctx, d.cfg.Listen, d.handler(d.reg))
		if err != nil {
			closeAll(units)
			return err
		}
		defer stop()
	}
	read := d.start(ctx, units, nil)
	select { // READY=1 once the current weights were read (or tried to be)
	case <-read:
	case <-ctx.Done():
	}
	d.notifier.Notify("READY=1")
	go d.watchdog(ctx)
	for {
		select {
		case <-ctx.Done():
			d.notifier.Notify("STOPPING=1")
			d.log.Info("stopping")
			d.current().stop()
			return d.restore(ctx)
		case <-hup:
			d.reloadConfig(ctx)
		}
	}
}

// group is the set of runners of one configuration.
type group struct {
	units   []*Unit
	runners []*runner
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	wait    time.Duration // how long stop waits for the runners
}

// stop stops the runners, waits for the cycles in flight (cancelled only
// when the daemon's context ended: shutdown), and closes the units. A runner
// still busy after g.wait has a source or target that ignores its timeout:
// stop logs it, leaves it (and its unit) alone and returns its backend, so
// that neither shutdown (and restore_on_exit) nor a reload hangs on it.
func (g *group) stop() (stuck []string) {
	g.cancel()
	ended := make(chan struct{})
	go func() { g.wg.Wait(); close(ended) }()
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	select {
	case <-ended:
	case <-timer.C:
	}
	for _, r := range g.runners {
		select {
		case <-r.done:
			r.unit.Close()
		default:
			r.log.Error("backend loop did not stop in time (its source or target ignores the cycle timeout); "+
				"going on without it", "waited", g.wait)
			stuck = append(stuck, r.unit.Backend.Name)
		}
	}
	return stuck
}

// runner returns the runner of the named backend, or nil.
func (g *group) runner(backend string) *runner {
	for _, r := range g.runners {
		if r.unit.Backend.Name == backend {
			return r
		}
	}
	return nil
}

func (d *Daemon) current() *group {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.group
}

// start starts one runner per backend. Each first checks its backend and
// reads its weights, in its own goroutine: a backend whose HAProxy or IPVS does
// not answer holds back no other, and start-up and reload last at most one
// cycle timeout, not one per backend. The returned channel is closed when
// every start-up read is done. A backend prev (the group a reload replaces)
// also ran keeps its readiness.
func (d *Daemon) start(ctx context.Context, units []*Unit, prev *group) <-chan struct{} {
	cfg := d.config()
	t := Timing{Interval: cfg.Interval, Timeout: cfg.CycleTimeout(), Jitter: cfg.Jitter}
	gctx, cancel := context.WithCancel(ctx)
	g := &group{units: units, cancel: cancel, wait: t.Timeout + d.grace}
	for _, u := range units {
		d.metrics.Init(u.Backend.Name)
		r := newRunner(u, t, d.clock, d.metrics, d.log)
		r.after = d.updateReady
		if cfg.RestoreOnExit && u.haproxy != nil {
			r.before = func(ctx context.Context) error { return d.snapshot(ctx, u) }
		}
		r.before = startChecked(u, r.before)
		if prev != nil {
			r.inherit(prev.runner(u.Backend.Name))
		}
		g.runners = append(g.runners, r)
	}
	d.mu.Lock()
	d.group = g
	d.mu.Unlock()
	var reads sync.WaitGroup
	for _, r := range g.runners {
		reads.Add(1)
		g.wg.Go(func() {
			defer close(r.done)
			d.initialRead(gctx, r.unit, t.Timeout)
			r.beat() // the loop turned: with timeout > 2 intervals, read + first cycle outlast alive's bound
			reads.Done()
			r.run(ctx, gctx)
		})
	}
	read := make(chan struct{})
	go func() { reads.Wait(); close(read) }()
	return read
}

// initialRead checks the target and logs its current weights.
// A failure is logged, not fatal: the backend's cycles retry every interval.
func (d *Daemon) initialRead(stop context.Context, u *Unit, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(stop, timeout)
	defer cancel()
	log := d.log.With("backend", u.Backend.Name)
	failed := func(msg string, err error) {
		if stop.Err() != nil { // reload or shutdown, not the backend's fault
			log.Debug(msg, "err", err)
			return
		}
		log.Error(msg, "err", err)
	}
	if err := u.StartCheck(ctx); err != nil {
		failed("backend check failed; each cycle retries it and writes nothing until it passes", err)
		return
	}
	servers, err := u.Backend.Target.Servers(ctx)
	if err != nil {
		failed("read current weights failed; cycling anyway, each cycle retries", err)
		return
	}
	weights := make([]string, len(servers))
	for i, s := range servers {
		weights[i] = fmt.Sprintf("%s=%d", s.Name, s.Weight)
	}
	log.Info("current weights", "servers", len(servers), "weights", weights)
}

// snapshot keeps, for restore_on_exit, the weights of an HAProxy backend as
// they were before the daemon's first write to it. Its runner calls it before
// every cycle until it succeeds, and a failure fails the cycle: a backend
// whose HAProxy was down at start is snapshotted when HAProxy answers, and
// nothing is written that could not be restored. A reload keeps the snapshot.
func (d *Daemon) snapshot(ctx context.Context, u *Unit) error {
	d.mu.Lock()
	_, have := d.snapshots[u.Backend.Name]
	d.mu.Unlock()
	if have {
		return nil
	}
	weights, err := u.haproxy.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("read start-up weights for restore_on_exit, writing nothing until then: %w", err)
	}
	d.mu.Lock()
	d.snapshots[u.Backend.Name] = u.haproxy
	d.mu.Unlock()
	d.log.Info("start-up weights kept for restore_on_exit", "backend", u.Backend.Name, "servers", len(weights))
	return nil
}

// restore writes back the start-up weights of the backends still configured.
func (d *Daemon) restore(ctx context.Context) error {
	cfg := d.config()
	if !cfg.RestoreOnExit {
		return nil
	}
	names := make([]string, 0, len(cfg.Backends))
	for _, b := range cfg.Backends {
		names = append(names, b.Name)
	}
	return d.restoreBackends(ctx, cfg.CycleTimeout(), names, "restore_on_exit")
}

// restoreBackends writes back the start-up weights of the named backends that
// have them, within timeout. A restored backend's snapshot is dropped, so a
// backend configured again later starts from what it has then; one that
// failed keeps it. The error names each backend that failed.
func (d *Daemon) restoreBackends(ctx context.Context, timeout time.Duration, names []string, why string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var errs []error
	for _, name := range names {
		d.mu.Lock()
		hb := d.snapshots[name]
		d.mu.Unlock()
		if hb == nil {
			continue
		}
		if err := hb.Restore(ctx); err != nil {
			d.log.Error(why+" failed, the daemon's last weights stay", "backend", name, "err", err)
			errs = append(errs, fmt.Errorf("%s: backend %s: %w", why, name, err))
			continue
		}
		d.mu.Lock()
		delete(d.snapshots, name)
		d.mu.Unlock()
		d.log.Info("weights restored", "backend", name, "why", why)
	}
	return errors.Join(errs...)
}

func (d *Daemon) config() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// reloadConfig replaces the configuration, or keeps the old one in force
// when the new one does not load or build.
func (d *Daemon) reloadConfig(ctx context.Context) {
	if d.reload == nil {
		return
	}
	cfg, err := d.reload()
	var units []*Unit
	if err == nil {
		units, err = Build(cfg, d.log)
	}
	if err != nil {
		d.log.Error("config reload rejected, keeping the old configuration", "err", err)
		d.metrics.SetReloadSuccess(false)
		return
	}
	old := d.config()
	if cfg.Listen != old.Listen {
		d.log.Warn("listen address changes need a restart", "listen", old.Listen)
	}
	prev := d.current()
	stuck := prev.stop()
	// A stuck runner may still use its Controller and Source: its backend starts afresh.
	keepControllers(slices.DeleteFunc(slices.Clone(prev.units), func(u *Unit) bool {
		return slices.Contains(stuck, u.Backend.Name)
	}), units)
	var removed []string
	for _, b := range old.Backends {
		if !slices.ContainsFunc(cfg.Backends, func(n config.Backend) bool { return n.Name == b.Name }) {
			d.metrics.Forget(b.Name)
			if !slices.Contains(stuck, b.Name) {
				removed = append(removed, b.Name)
			}
		}
	}
	if old.RestoreOnExit {
		// The daemon lets go of a backend the reload removed: with
		// restore_on_exit its weights (drains included) must not outlive that
		// either. Its runner has stopped, so nothing writes there any more.
		// A failure is logged; the daemon goes on with the new configuration.
		_ = d.restoreBackends(ctx, old.CycleTimeout(), removed, "restore of a backend removed by the reload")
	}
	d.mu.Lock()
	d.cfg = cfg
	d.mu.Unlock()
	d.start(ctx, units, prev)
	d.log.Info("config reloaded", "backends", len(cfg.Backends))
	d.metrics.SetReloadSuccess(true)
}

// Ready reports whether every backend had an ok cycle within 3 intervals, and if not, which did not.
func (d *Daemon) Ready() (bool, string) {
	g := d.current()
	if g == nil {
		return false, "starting"
	}
	now := d.clock.Now()
	for _, r := range g.runners {
		if !r.ready(now) {
			return false, fmt.Sprintf("backend %s: no successful cycle within 3 intervals", r.unit.Backend.Name)
		}
	}
	return true, ""
}

func (d *Daemon) updateReady() {
	ok, _ := d.Ready()
	d.metrics.SetReady(ok)
}

// keepControllers hands each backend whose target kind and policy a reload left
// unchanged its old Controller, so the daemon does not forget what it wrote and
// drained: a weight 0 it set would otherwise look like an operator's drain and
// stay, and a weight reset behind its back would no longer be re-applied. A
// backend whose source a reload left unchanged keeps its old Source too: the
// HAProxy stats source would otherwise forget its reads and hold the weights
// for a whole rate_window. The old runners have stopped, so nothing else uses
// the old Controllers and Sources.
func keepControllers(old, next []*Unit) {
	prev := make(map[string]*Unit, len(old))
	for _, u := range old {
		prev[u.Backend.Name] = u
	}
	for _, u := range next {
		o, ok := prev[u.Backend.Name]
		if ok && o.Kind == u.Kind && o.Backend.Controller.Policy() == u.Backend.Controller.Policy() {
			u.Backend.Controller = o.Backend.Controller
		}
		if ok && sameSource(o, u) {
			u.Backend.Source = o.Backend.Source
		}
	}
}

// sameSource reports whether a and b were built from the same source
// configuration (and, for the HAProxy stats source, the same socket). Units
// not built by Build never match.
func sameSource(a, b *Unit) bool {
	if a.source.Kind() == "" || !reflect.DeepEqual(a.source, b.source) {
		return false
	}
	return a.source.HAProxy == nil || a.socket == b.socket
}

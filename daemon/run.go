package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Run starts every backend and blocks until ctx ends; then it stops the
// cycles and restores the start-up weights if configured. It returns an error
// when a restore failed, so that the process exits non-zero: a supervisor or
// operator must learn that HAProxy kept the daemon's weights (drains
// included) after it stopped. A value on hup reloads the configuration.
func (d *Daemon) Run(ctx context.Context, hup <-chan os.Signal) error {
	units, err := build(d.cfg, d.log, buildOptions{peers: d.peers, zeroes: d.zeroes})
	if err != nil {
		return err
	}
	d.startPeers(ctx, d.cfg)
	defer d.peers.Stop()
	d.metrics.SetReloadSuccess(true)
	if d.cfg.Listen != "" {
		stop, err := d.serve(ctx, d.cfg.Listen, d.handler(d.reg))
		if err != nil {
			closeAll(units)
			return err
		}
		defer stop()
	}
	d.warnHAProxyConfig(d.cfg)
	read := d.start(ctx, units, nil)
	select { // READY=1 once the current weights were read (or tried to be)
	case <-read:
	case <-ctx.Done():
	}
	d.notifier.Notify("READY=1")
	go d.watchdog(ctx)
	q := &reloadQueue{spacing: minReloadSpacing}
	defer q.stop()
	for {
		select {
		case <-ctx.Done():
			d.notifier.Notify("STOPPING=1")
			d.log.Info("stopping")
			d.current().stop()
			return d.restore(ctx)
		case <-hup:
			if q.request(time.Now()) {
				d.applyReload(ctx, q)
			} else {
				d.log.Debug("reload coalesced",
					"pending", q.pending, "spacing", q.spacing)
			}
		case <-q.due():
			d.applyReload(ctx, q)
		}
	}
}

// applyReload applies the reload requests q holds, once.
func (d *Daemon) applyReload(ctx context.Context, q *reloadQueue) {
	d.reloadConfig(ctx, q.take())
	q.applied(time.Now())
}

// start starts one runner per backend. Each first checks its backend and
// reads its weights, in its own goroutine: a backend whose HAProxy or IPVS does
// not answer holds back no other, and start-up and reload last at most one
// cycle timeout, not one per backend. The returned channel is closed when
// every start-up read is done. A backend prev (the group a reload replaces)
// also ran keeps its readiness.
func (d *Daemon) start(ctx context.Context, units []*managedBackend, prev *group) <-chan struct{} {
	cfg := d.config()
	t := Timing{Interval: time.Duration(cfg.Interval), Timeout: cfg.CycleTimeout(), Jitter: cfg.Jitter}
	gctx, cancel := context.WithCancel(ctx)
	g := &group{units: units, cancel: cancel, wait: t.Timeout + d.grace}
	for _, u := range units {
		if cfg.RestoreOnExit && !u.dryRun {
			// Before this target's first read, hence before any write, it
			// keeps the weights to restore (a target that cannot is left as is).
			u.Backend.Target = d.startWeights.wrap(u.Backend.Name, u.Backend.Target)
		}
		d.metrics.Init(u.Backend.Name)
		if u.fast == nil {
			d.metrics.SetFastState(u.Backend.Name, weighter.FastOff)
		} else if prev == nil || prev.runner(u.Backend.Name) == nil {
			d.metrics.SetFastState(u.Backend.Name, weighter.FastStarting)
		}
		ut := t
		if u.client != nil {
			ut.Overrun = u.socket.StallTimeout()
		}
		r := newRunner(u, ut, d.clock, d.metrics, d.log)
		d.startDryRun(r, prev)
		r.after = d.updateReady
		r.shared = d.shared
		if prev != nil {
			r.inherit(prev.runner(u.Backend.Name))
			r.inheritSchedule(prev.runner(u.Backend.Name))
			r.said = saidBefore(prev.runner(u.Backend.Name), u)
		}
		g.runners = append(g.runners, r)
	}
	d.shared.retain(units)
	d.mu.Lock()
	d.group = g
	d.mu.Unlock()
	var reads sync.WaitGroup
	for _, r := range g.runners {
		reads.Add(1)
		g.wg.Go(func() {
			defer close(r.done)
			st := d.initialRead(gctx, r.unit, t.Timeout, r.said)
			r.fastAtStart(st)
			r.waitForSecondRead(st)
			r.beat() // the loop turned: with timeout > 2 intervals, read + first cycle outlast alive's bound
			reads.Done()
			r.run(ctx, gctx)
		})
	}
	read := make(chan struct{})
	go func() { reads.Wait(); close(read) }()
	return read
}

// initialRead checks the target, logs its current weights and, for a
// backend that weighs by the fast signal, reads it once (so that the first
// cycle has a rate) and says how the backend is weighted. It returns the
// fast signal's state ("" when it was not read). A failure is logged, not
// fatal: the backend's cycles retry every interval. What the runner a reload
// replaced had said already (said) is logged at debug.
func (d *Daemon) initialRead(stop context.Context, u *managedBackend, timeout time.Duration, said startSaid) weighter.FastState {
	ctx, cancel := context.WithTimeout(stop, timeout)
	defer cancel()
	log := d.log.With("backend", u.Backend.Name)
	failed := func() slog.Level {
		if stop.Err() != nil || said.failing { // reload or shutdown, not the backend's fault; or said already
			return slog.LevelDebug
		}
		return slog.LevelError
	}
	if err := u.StartCheck(ctx); err != nil {
		log.Log(ctx, failed(), "backend check failed", "err", err, "next", "each cycle retries it and writes nothing until it passes")
		return ""
	}
	servers, err := u.Backend.Target.Servers(ctx)
	if err != nil {
		log.Log(ctx, failed(), "read current weights failed", "err", err, "next", "cycling anyway, each cycle retries")
		return ""
	}
	weights := make([]string, len(servers))
	for i, s := range servers {
		weights[i] = fmt.Sprintf("%s=%d", s.Name, s.Weight)
	}
	level := slog.LevelInfo
	if said.ran {
		level = slog.LevelDebug
	}
	log.Log(ctx, level, "current weights", "servers", len(servers), "weights", weights)
	if u.fast == nil {
		if u.fastOff != "" {
			log.Log(ctx, level, "fast signal off", "reason", u.fastOff, "effect", "weighting by the source alone")
		}
		return ""
	}
	return u.primeFast(ctx, servers, log, said)
}

// startSaid is what the runner a reload replaced had said of its backend,
// so that the new runner's start-up read does not say it again at each
// reload: the log says what changed, once.
type startSaid struct {
	ran      bool // the backend ran before the reload on the same target: its weights were logged
	failing  bool // its last cycle could not read or write the target (a failed check included)
	fastKept bool // the reload kept its fast signal reader: how it weighs was said
	fastDead bool // the fast signal was dead or unreadable, and said so
}

// saidBefore returns what old (nil: none) had said of the backend u now runs.
func saidBefore(old *runner, u *managedBackend) startSaid {
	if old == nil {
		return startSaid{}
	}
	old.mu.Lock()
	defer old.mu.Unlock()
	if old.unit.Kind != u.Kind || old.unit.socket.Socket != u.socket.Socket {
		return startSaid{} // moved to another HAProxy or to IPVS: another target's weights
	}
	return startSaid{ran: true, failing: old.last.Cycle.Result == weighter.ResultTargetError,
		fastKept: u.fast != nil && u.fast == old.unit.fast, fastDead: old.cl.fastKnown && old.cl.fastDead}
}

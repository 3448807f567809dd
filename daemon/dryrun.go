package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// A dry run (run --dry-run, or dry_run: true on a backend) is a shadow of the
// live daemon: its cycles read, plan, log and export exactly as live ones do,
// and skip the whole apply step of the plan (weighter.RunCycle with apply
// off), so nothing the plan would do reaches the target. It does not keep
// start-up weights for restore_on_exit either: it changes nothing to restore.
//
// HAProxy's weights do not move under a dry run, so the plan asks for the
// same change every cycle until the loads no longer call for it. A change is
// logged ("would set") and counted once: when the weight wanted for a server
// differs from the one last said.

// startDryRun exports whether r's backend is a dry run and says so when that
// changes (at start, or by a reload that sets or clears dry_run).
func (d *Daemon) startDryRun(r *runner, prev *group) {
	r.apply = !r.unit.dryRun
	d.metrics.SetDryRun(r.unit.Backend.Name, r.unit.dryRun)
	wasDry := false
	if prev != nil {
		if old := prev.runner(r.unit.Backend.Name); old != nil {
			wasDry = old.unit.dryRun
		}
	}
	switch {
	case r.unit.dryRun && !wasDry:
		r.log.Info("dry run on", "effect", "planning and exporting, writing nothing to this backend")
	case !r.unit.dryRun && wasDry:
		r.log.Info("dry run off", "effect", "this backend's weights are written from its next cycle")
	}
}

// wouldSet logs, in a dry run, the weight changes the plan wants that were
// not said yet: at info their number, the largest and the imbalance (as a
// live cycle's "weights written"); each at debug. It returns their number.
func (l *cycleLog) wouldSet(ln *line, c weighter.Cycle) int {
	if c.Applied {
		l.would = nil // a live cycle: a later dry run says everything again
		return 0
	}
	if c.Result != weighter.ResultOK {
		return 0 // no plan to go by (or a held one): what was said stands
	}
	now := map[string]int{}
	var largest *weighter.ServerPlan
	move, fresh := -1.0, 0
	for i := range c.Plan.Servers {
		s := &c.Plan.Servers[i]
		if s.Action != weighter.ActionSet {
			continue
		}
		now[s.Server] = s.New
		if w, said := l.would[s.Server]; said && w == s.New {
			continue
		}
		fresh++
		l.log.Debug("would set weight", "server", s.Server, "from", s.Current, "to", s.New, "load", s.Load, "reason", s.Reason)
		if m := moveSize(s.Current, s.New); m > move {
			largest, move = s, m
		}
	}
	l.would = now
	if fresh == 0 {
		return 0
	}
	attrs := []any{"would_set", fresh, "servers", len(c.Plan.Servers),
		"largest", fmt.Sprintf("%s %d→%d", largest.Server, largest.Current, largest.New), "reason", largest.Reason}
	if c.Plan.Imbalance > 0 {
		attrs = append(attrs, "imbalance", round2(c.Plan.Imbalance))
	}
	ln.add(slog.LevelInfo, "would set weights", attrs...)
	return fresh
}

// restoreTurnedDry gives, with restore_on_exit, each backend that a reload
// turns from live into a dry run its start-up weights back at once, as it
// does for a backend the reload removes: the daemon stops writing there, and
// its weights (drains included) must not outlive that. A failure is logged
// and the weights are tried again at exit.
func (d *Daemon) restoreTurnedDry(ctx context.Context, old, next *config.Config, stuck []string) {
	if !old.RestoreOnExit {
		return
	}
	var names []string
	for _, b := range next.Backends {
		wasLive := slices.ContainsFunc(old.Backends, func(o config.Backend) bool { return o.Name == b.Name && !o.DryRun })
		if b.DryRun && wasLive && !slices.Contains(stuck, b.Name) {
			names = append(names, b.Name)
		}
	}
	if len(names) > 0 {
		_ = d.startWeights.restore(ctx, old.CycleTimeout(), names, "restore of a backend a reload turned into a dry run")
	}
}

package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// StartCheck runs the unit's start check (Check: the backend exists, the
// socket is admin, the algorithm honours runtime weights) until it has passed
// once, and is a no-op after that.
//
// A backend whose check fails must get no write: a `balance first` backend
// accepts weights and ignores them, so without the gate its cycles were
// counted ok and the daemon called it ready. A check that fails for a passing
// reason (HAProxy restarting) is retried by the next cycle.
func (u *Unit) StartCheck(ctx context.Context) error {
	if u.checked.Load() {
		return nil
	}
	if err := u.Check(ctx); err != nil {
		return err
	}
	u.checked.Store(true)
	return nil
}

// CheckedCycle is one cycle as run's runners and RunOnce both run it: the
// start check first (`once` must refuse what `run` refuses, dry run or not),
// then the cycle.
func (u *Unit) CheckedCycle(ctx context.Context, now time.Time, apply bool) weighter.Cycle {
	if err := u.StartCheck(ctx); err != nil {
		return checkFailed(u.Backend.Name, now, apply, err)
	}
	return weighter.RunCycle(ctx, u.Backend, now, apply)
}

// checkFailed is the cycle of a backend whose start check failed: a target
// error, nothing planned or written.
func checkFailed(name string, now time.Time, apply bool, err error) weighter.Cycle {
	return weighter.Cycle{Backend: name, Plan: weighter.Plan{Backend: name, Time: now},
		Result: weighter.ResultTargetError, Err: err, Applied: apply}
}

// warnHAProxyConfig logs at WARN, once each in the daemon's life, what
// HAProxy's configuration file (haproxy.config_file) says will keep cfg's
// backends from being weighted. A file that cannot be read is a warning too:
// the checks are advice, and weighting goes on without them.
func (d *Daemon) warnHAProxyConfig(cfg *config.Config) {
	warnings, err := cfg.HAProxyFileWarnings()
	once := func(text string, args ...any) {
		key := fmt.Sprint(append([]any{text}, args...)...)
		if d.haproxyWarned[key] {
			return
		}
		if d.haproxyWarned == nil {
			d.haproxyWarned = map[string]bool{}
		}
		d.haproxyWarned[key] = true
		d.log.Warn(text, args...)
	}
	if err != nil {
		once("haproxy.config_file not checked; weighting goes on", "err", err)
	}
	for _, w := range warnings {
		once(w.String())
	}
}

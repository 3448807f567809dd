package daemon

import (
	"context"
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
func (u *managedBackend) StartCheck(ctx context.Context) error {
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
func (u *managedBackend) CheckedCycle(ctx context.Context, now time.Time, apply bool) weighter.Cycle {
	if err := u.StartCheck(ctx); err != nil {
		return checkFailed(u.Backend.Name, now, apply, err)
	}
	c := weighter.RunCycle(ctx, u.Backend, now, apply)
	listConnsForPins(u, c)
	return c
}

// checkFailed is the cycle of a backend whose start check failed: a target
// error, nothing planned or written.
func checkFailed(name string, now time.Time, apply bool, err error) weighter.Cycle {
	return weighter.Cycle{Backend: name, Plan: weighter.Plan{Backend: name, Time: now},
		Result: weighter.ResultTargetError, Err: err, Applied: apply}
}

// warnHAProxyConfig logs at WARN what HAProxy's configuration file
// (haproxy.config_file) says will keep cfg's backends from being weighted:
// at start each warning, at a reload each one the last check did not have
// (an operator who fixed a line and broke it again learns it at the reload
// that followed). A file that cannot be read is a warning too: the checks
// are advice, and weighting goes on without them. It is logged once while
// the error stays the same, and the warnings last read from the file stand
// meanwhile, so that the file back as it was says nothing.
func (d *Daemon) warnHAProxyConfig(cfg *config.Config) {
	next := map[string]haproxyFileState{}
	for _, c := range cfg.HAProxyFileChecks() {
		last, seen := d.haproxyChecked[c.Path]
		if c.Err != nil {
			if !seen || last.err != c.Err.Error() {
				d.log.Warn("haproxy.config_file not checked", "err", c.Err, "effect", "weighting goes on")
			}
			last.err = c.Err.Error()
			next[c.Path] = last
			continue
		}
		now := haproxyFileState{warnings: map[string]bool{}}
		for _, w := range c.Warnings {
			text := w.String()
			if !last.warnings[text] && !now.warnings[text] {
				d.log.Warn("haproxy config warning", "warning", text)
			}
			now.warnings[text] = true
		}
		next[c.Path] = now
	}
	d.haproxyChecked = next
}

// haproxyFileState is what the last check of one HAProxy configuration file
// found: the warnings last read from it, and why it could not be read, if it
// could not.
type haproxyFileState struct {
	warnings map[string]bool
	err      string
}

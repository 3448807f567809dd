package daemon

import (
	"context"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// watchdog sends WATCHDOG=1 at half the $WATCHDOG_USEC period while every
// runner's loop still turns, so systemd restarts a daemon whose loop is stuck.
func (d *Daemon) watchdog(ctx context.Context) {
	period, err := sd.SdWatchdogEnabled(false)
	if err != nil || period <= 0 {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.clock.After(period / 2):
		}
		if r := d.stuck(); r == nil {
			d.notifier.Notify("WATCHDOG=1")
		} else {
			r.mu.Lock()
			last := r.lastBeat
			r.mu.Unlock()
			d.log.Error("backend loop stuck", "backend", r.unit.Backend.Name, "last_cycle_end", last,
				"reason", "no cycle ended for too long", "effect", "not feeding the watchdog, systemd will restart the daemon")
		}
	}
}

// stuck returns the first runner whose loop no longer turns, or nil.
func (d *Daemon) stuck() *runner {
	g := d.current()
	if g == nil {
		return nil
	}
	now := d.clock.Now()
	for _, r := range g.runners {
		if !r.alive(now) {
			return r
		}
	}
	return nil
}

// alive reports whether the runner's loop still turns: its last cycle ended
// within an interval plus jitter plus a timeout and its overrun (plus one
// more interval of slack).
func (r *runner) alive(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Sub(r.lastBeat) <= 2*r.timing.Interval+r.timing.Timeout+r.timing.Overrun
}

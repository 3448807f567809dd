package daemon

import (
	"context"

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
		if d.alive() {
			d.notifier.Notify("WATCHDOG=1")
		} else {
			d.log.Error("a backend loop is stuck; not feeding the watchdog")
		}
	}
}

func (d *Daemon) alive() bool {
	g := d.current()
	if g == nil {
		return true
	}
	now := d.clock.Now()
	for _, r := range g.runners {
		if !r.alive(now) {
			return false
		}
	}
	return true
}

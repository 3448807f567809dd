package daemon

import (
	"fmt"
	"strings"
	"time"
)

// Ready reports whether every backend had an ok cycle within 3 intervals, and if not, which did not
// (each with how its HAProxy socket answered last).
func (d *Daemon) Ready() (bool, string) {
	g := d.current()
	if g == nil {
		return false, "starting"
	}
	now := d.clock.Now()
	var why []string
	for _, r := range g.runners {
		if !r.ready(now) {
			why = append(why, fmt.Sprintf("backend %s%s: no successful cycle within 3 intervals", r.unit.Backend.Name, r.unit.socketNote()))
		}
	}
	return len(why) == 0, strings.Join(why, "; ")
}

// updateReady exports Ready as the ready gauge; runners call it after each cycle.
func (d *Daemon) updateReady() {
	ok, _ := d.Ready()
	d.metrics.SetReady(ok)
}

// ready reports whether the backend had an ok cycle within 3 intervals, or
// within the longest time two ok cycles can end apart (interval + jitter +
// timeout) when that is longer: with timeout > 2 intervals, slow cycles that
// all succeed would otherwise flap readiness.
func (r *runner) ready(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.readyLocked(now)
}

func (r *runner) readyLocked(now time.Time) bool {
	window := max(3*r.timing.Interval,
		time.Duration(float64(r.timing.Interval)*(1+r.timing.Jitter))+r.timing.Timeout+r.timing.Overrun)
	return !r.lastOK.IsZero() && now.Sub(r.lastOK) <= window
}

package daemon

import (
	"context"
	"slices"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// RunOnce runs one cycle of every backend, one after the other, as Run's
// runners do (start check, then the cycle), and returns the cycles in the
// configuration's order. It writes only with apply, and never to a backend
// with dry_run. A failed cycle is
// reported in its Cycle; the error is the configuration's failure to build.
func (d *Daemon) RunOnce(ctx context.Context, apply bool) ([]weighter.Cycle, error) {
	d.warnHAProxyConfig(d.config())
	cfg, wait := sampleOnce(d.config())
	// A backend that weighs by the fast signal reads it twice, an interval
	// apart, for a rate: the single cycle waits that long.
	o := buildOptions{zeroes: d.zeroes}
	for i := range cfg.Backends {
		if cfg.Backends[i].UsesFastSignal() {
			o.firstWait = time.Duration(cfg.Interval)
			wait = max(wait, o.firstWait)
		}
	}
	units, err := build(cfg, d.log, o)
	if err != nil {
		return nil, err
	}
	cycles := make([]weighter.Cycle, len(units))
	for i, u := range units {
		// The source may use 4/5 of a cycle (the write keeps the rest), so
		// the wait for a rate window is added twice, not once.
		cctx, cancel := context.WithTimeout(ctx, cfg.CycleTimeout()+2*wait)
		// dry_run: true holds for once too: --apply writes nothing there.
		cycles[i] = u.CheckedCycle(cctx, d.clock.Now(), apply && !u.dryRun)
		cancel()
		u.Close()
	}
	return cycles, nil
}

// sampleOnce returns a copy of cfg in which every source that needs it is
// set up for a single cycle, leaving cfg as it is, and the longest wait, which
// the cycle's timeout must allow for.
func sampleOnce(cfg *config.Config) (*config.Config, time.Duration) {
	out := *cfg
	out.Backends = slices.Clone(cfg.Backends)
	var wait time.Duration
	for i := range out.Backends {
		one, w := out.Backends[i].Source.ForOneCycle()
		out.Backends[i].Source = one
		wait = max(wait, w)
	}
	return &out, wait
}

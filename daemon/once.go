package daemon

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// RunOnce runs one cycle of every backend, one after the other, as Run's
// runners do (start check, then the cycle), and returns the cycles in the
// configuration's order. It writes only with apply. A failed cycle is
// reported in its Cycle; the error is the configuration's failure to build.
func (d *Daemon) RunOnce(ctx context.Context, apply bool) ([]weighter.Cycle, error) {
	cfg, wait := sampleOnce(d.config())
	units, err := Build(cfg, d.log)
	if err != nil {
		return nil, err
	}
	cycles := make([]weighter.Cycle, len(units))
	for i, u := range units {
		// The source may use 4/5 of a cycle (the write keeps the rest), so
		// the wait for a rate window is added twice, not once.
		cctx, cancel := context.WithTimeout(ctx, cfg.CycleTimeout()+2*wait)
		cycles[i] = u.CheckedCycle(cctx, d.clock.Now(), apply)
		cancel()
		u.Close()
	}
	return cycles, nil
}

// sampleOnce lets a single cycle get a rate from HAProxy's own counters. The
// daemon holds its first cycles until its reads span the source's
// rate_window; one cycle instead waits that long and reads again (unless the
// config sets sample_interval). It returns a copy of cfg with that
// sample_interval, leaving cfg as it is, and the longest wait, which the
// cycle's timeout must allow for.
func sampleOnce(cfg *config.Config) (*config.Config, time.Duration) {
	out := *cfg
	out.Backends = slices.Clone(cfg.Backends)
	var wait time.Duration
	for i := range out.Backends {
		h := out.Backends[i].Source.HAProxy
		if h == nil || h.SampleInterval > 0 {
			continue
		}
		sampled := *h
		sampled.SampleInterval = cmp.Or(h.RateWindow, haproxy.DefaultRateWindow)
		out.Backends[i].Source.HAProxy = &sampled
		wait = max(wait, sampled.SampleInterval)
	}
	return &out, wait
}

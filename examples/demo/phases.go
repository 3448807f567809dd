package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
	"github.com/haproxy-weighter/haproxy-weighter/internal/freeport"
)

// phases samples every second; after Phase1 it starts haproxy-weighter, after
// Phase1+Phase2 it returns.
func (d *demo) phases(ctx context.Context) error {
	names := make([]string, len(d.sinks))
	for i, s := range d.sinks {
		names[i] = s.Name
	}
	disp := &display{w: os.Stdout, tty: isTerminal(os.Stdout), names: names, phases: [2]time.Duration{d.o.Phase1, d.o.Phase2}}
	disp.titles[0] = "without weighting (all weights 100, leastconn only)"
	policy := ""
	if p := strings.TrimSpace(d.o.Policy); p != "" {
		policy = ", " + strings.ReplaceAll(p, ";", ",")
	}
	load := fmt.Sprintf("HAProxy bytes_in rate over %s", d.o.Window)
	if d.o.PerConn {
		load += " per connection"
	}
	disp.titles[1] = fmt.Sprintf("with haproxy-weighter run (%s, every %s%s, load = %s)",
		d.o.Function, d.o.Interval, policy, load)
	start := time.Now()
	prev, prevCtl, prevAt := loadlab.ReadBytes(d.sinks), loadlab.ReadBytes(d.ctlSink), start
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for phase := 1; ; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			cur, curCtl := loadlab.ReadBytes(d.sinks), loadlab.ReadBytes(d.ctlSink)
			dt := now.Sub(prevAt)
			smp, err := d.sample(ctx, now.Sub(start), phase, prev, cur, dt)
			if err != nil {
				return err
			}
			for i := range curCtl {
				smp.Control = append(smp.Control, float64(curCtl[i]-prevCtl[i])/dt.Seconds())
			}
			prev, prevCtl, prevAt = cur, curCtl, now
			d.samples = append(d.samples, smp)
			disp.show(d.samples)
		}
		el := time.Since(start)
		if phase == 1 && el >= d.o.Phase1 {
			phase = 2
			if err := d.startWeighter(ctx); err != nil {
				return err
			}
		}
		if el >= d.o.Phase1+d.o.Phase2 {
			return nil
		}
		if ok, err := d.ctl.Exited(); ok {
			return fmt.Errorf("control haproxy exited: %v\n%s", err, tail(filepath.Join(d.dir, "control.log")))
		}
		if d.weigher != nil {
			if ok, err := d.weigher.Exited(); ok {
				return fmt.Errorf("haproxy-weighter exited early: %v\n%s", err, tail(filepath.Join(d.dir, "weighter.log")))
			}
		}
	}
}

// sample builds one second's sample from the sinks' counters and HAProxy's stats.
// A tick that comes late (a busy machine) still yields bytes per second.
func (d *demo) sample(ctx context.Context, at time.Duration, phase int, prev, cur []int64, dt time.Duration) (sample, error) {
	s := sample{T: at, Phase: phase, Late: dt > 1500*time.Millisecond}
	st, err := showStat(ctx, d.socket)
	if err != nil {
		// A busy machine can delay one reply; HAProxy being gone is fatal.
		if ok, werr := d.haproxy.Exited(); ok {
			return s, fmt.Errorf("haproxy exited: %v\n%s", werr, tail(filepath.Join(d.dir, "haproxy.log")))
		}
		if len(d.samples) == 0 {
			return s, fmt.Errorf("read haproxy stats: %w", err)
		}
		last := d.samples[len(d.samples)-1]
		st = map[string]serverStat{}
		for i, sk := range d.sinks {
			st[sk.Name] = serverStat{Weight: last.Weights[i], Conns: last.Conns[i]}
		}
	}
	for i, sk := range d.sinks {
		s.Loads = append(s.Loads, float64(cur[i]-prev[i])/dt.Seconds())
		s.Weights = append(s.Weights, st[sk.Name].Weight)
		s.Conns = append(s.Conns, st[sk.Name].Conns)
	}
	return s, nil
}

// startWeighter writes the daemon's config and starts `haproxy-weighter run`.
func (d *demo) startWeighter(ctx context.Context) error {
	listen, err := freeport.Loopback()
	if err != nil {
		return err
	}
	cfg, err := writeWeighterConfig(d.dir, weighterConf{Interval: d.o.Interval, Window: d.o.Window, Listen: listen, Socket: d.socket, Function: d.o.Function, Extra: d.o.Policy, PerConn: d.o.PerConn})
	if err != nil {
		return err
	}
	logPath := filepath.Join(d.dir, "weighter.log")
	d.weigher, err = loadlab.StartChild("haproxy-weighter", logPath, d.o.Weighter, "run", "--config", cfg)
	if err != nil {
		return err
	}
	if err := d.weigher.WaitReady(ctx, 10*time.Second, loadlab.HTTPOK("http://"+listen+"/healthz")); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(logPath))
	}
	if !isTerminal(os.Stdout) {
		fmt.Printf("\nstarted: %s run --config %s  (metrics: http://%s/metrics)\n", d.o.Weighter, cfg, listen)
	}
	return nil
}

// isTerminal reports whether f is a character device (a terminal), not a pipe or file.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

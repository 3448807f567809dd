package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// restartHAProxies is -scenario restart's HAProxy restart, on every arm at the same
// moment: each HAProxy is stopped (SIGTERM: a hard stop, every connection closed) and
// started again on the same config, ports and admin socket, without a server-state file,
// so a weighted arm's runtime weights are the config's again and its weighter finds a
// new process behind the socket, as after a restart in production. The clients see their
// connections close and reconnect within -restart-within (clients.go).
func (l *lab) restartHAProxies(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(l.arms))
	for i, a := range l.arms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.hap.Stop(5 * time.Second)
			h, err := runHAProxy(ctx, l.o.hapBin, filepath.Join(l.dir, a.spec.Name+".cfg"),
				filepath.Join(l.dir, a.spec.Name+"-restarted.log"), a.spec.Name, a.socket, l.backend, len(a.sinks))
			if h != nil {
				a.hap = h // stopped with the rest, ready or not
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s haproxy restart: %w", a.spec.Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// restartSplit is -scenario restart's seed figures over the windows before the restart
// (from -warmup) and after it (to the end), labelled "<seed> before" and "<seed> after";
// nil for another scenario or when a side has no whole window.
func (o options) restartSplit(seed uint64, snaps []snapshot) []figures {
	if o.Scenario != scenarioRestart || o.RestartAt-o.Warmup < o.Window || o.Duration-o.RestartAt < o.Window {
		return nil
	}
	label := strconv.FormatUint(seed, 10)
	return []figures{
		figuresOf(label+" before", len(o.arms), snaps, o.Warmup, o.RestartAt, o.Window),
		figuresOf(label+" after", len(o.arms), snaps, o.RestartAt, o.Duration, o.Window),
	}
}

// splitRows are the before and after rows of every seed, then their means when there
// are several seeds.
func splitRows(before, after []figures) []figures {
	var rows []figures
	for i := range before {
		rows = append(rows, before[i], after[i])
	}
	if len(before) > 1 {
		mb, ma := meanOf(before), meanOf(after)
		mb.Label, ma.Label = "mean before", "mean after"
		rows = append(rows, mb, ma)
	}
	return rows
}

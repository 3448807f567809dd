package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// demo holds everything one run started, so that stopping it is one place.
type demo struct {
	o       options
	dir     string
	socket  string
	sinks   []*sink
	haproxy *child
	weigher *child
	traffic context.CancelFunc
	wg      sync.WaitGroup
	samples []sample
}

// run starts the parts, runs both phases, then stops everything (also on error or Ctrl-C)
// before printing the summary and writing the picture.
func run(ctx context.Context, o options) error {
	if _, err := os.Stat(o.Weighter); err != nil {
		return fmt.Errorf("haproxy-weighter binary: %w (run `make build` first)", err)
	}
	hap, err := findHAProxy(o.HAProxy)
	if err != nil {
		return err
	}
	dir, cleanup, err := workDir(o.Dir)
	if err != nil {
		return err
	}
	defer cleanup()
	d := &demo{o: o, dir: dir, socket: filepath.Join(dir, "admin.sock")}
	err = d.start(ctx, hap)
	if err == nil {
		err = d.phases(ctx)
	}
	d.stop()
	if err != nil {
		return err
	}
	return d.report()
}

// start opens the sinks, starts HAProxy and the traffic generator.
func (d *demo) start(ctx context.Context, hap string) error {
	sinks, err := startSinks(d.o.Servers)
	if err != nil {
		return err
	}
	d.sinks = sinks
	front, err := freePort()
	if err != nil {
		return err
	}
	conf := haproxyConf{Socket: d.socket, Frontend: front, Weight: 100}
	for _, s := range sinks {
		conf.Servers = append(conf.Servers, haproxyServer{Name: s.name, Addr: s.addr()})
	}
	cfg, err := writeHAProxyConfig(d.dir, conf)
	if err != nil {
		return err
	}
	fmt.Printf("HAProxy %s: frontend %s (leastconn, weight 100) in front of %d sink servers; work dir %s\n",
		hap, front, len(sinks), d.dir)
	d.haproxy, err = startChild("haproxy", filepath.Join(d.dir, "haproxy.log"), hap, "-db", "-f", cfg)
	if err != nil {
		return err
	}
	ready := func(ctx context.Context) error {
		st, err := showStat(ctx, d.socket)
		if err == nil && len(st) != len(sinks) {
			err = fmt.Errorf("%d of %d servers in show stat", len(st), len(sinks))
		}
		return err
	}
	if err := d.haproxy.waitReady(ctx, 10*time.Second, ready); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(filepath.Join(d.dir, "haproxy.log")))
	}
	t := d.o.Traffic
	t.Addr = front
	fmt.Printf("traffic: %d long-lived connections, lognormal rates (median %.0f B/s, sigma %.1f), mean life %s\n",
		t.Conns, t.Median, t.Sigma, t.Lifetime)
	tctx, cancel := context.WithCancel(ctx)
	d.traffic = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		runTraffic(tctx, t)
	}()
	return nil
}

// stop ends every part in order: clients, weighter, HAProxy, sinks. Safe after a
// partial start.
func (d *demo) stop() {
	if d.traffic != nil {
		d.traffic()
		d.wg.Wait()
	}
	if d.weigher != nil {
		d.weigher.stop(10 * time.Second)
	}
	if d.haproxy != nil {
		d.haproxy.stop(5 * time.Second)
	}
	closeSinks(d.sinks)
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Sprintf("--- %s (end) ---\n%s", filepath.Base(path), b)
}

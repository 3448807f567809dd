package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
	"github.com/haproxy-weighter/haproxy-weighter/internal/freeport"
)

// demo holds everything one run started, so that stopping it is one place.
//
// Two HAProxies receive the same traffic (every client opens one connection to each,
// with the same rate and lifetime): the weighted one, which haproxy-weighter drives in
// phase 2, and a control one that is never weighted. Phase 2 then compares weighting
// with no weighting under the very same traffic, not only with phase 1.
type demo struct {
	o       options
	dir     string
	socket  string
	sinks   []*loadlab.Sink
	haproxy *loadlab.Child
	ctl     *loadlab.Child  // control HAProxy
	ctlSock string          // its runtime socket
	ctlSink []*loadlab.Sink // its servers
	weigher *loadlab.Child
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
	d := &demo{o: o, dir: dir, socket: filepath.Join(dir, "admin.sock"), ctlSock: filepath.Join(dir, "control.sock")}
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

// start opens the sinks, starts both HAProxies and the traffic generator.
func (d *demo) start(ctx context.Context, hap string) error {
	var front, ctlFront string
	var err error
	d.sinks, d.haproxy, front, err = d.startHAProxy(ctx, hap, "haproxy", d.socket)
	if d.haproxy == nil || err != nil {
		return err
	}
	d.ctlSink, d.ctl, ctlFront, err = d.startHAProxy(ctx, hap, "control", d.ctlSock)
	if d.ctl == nil || err != nil {
		return err
	}
	fmt.Printf("HAProxy %s: frontend %s (leastconn, weight 100) in front of %d sink servers; work dir %s\n",
		hap, front, len(d.sinks), d.dir)
	fmt.Printf("control HAProxy: frontend %s, same setup and same traffic, never weighted\n", ctlFront)
	t := d.o.Traffic
	t.Addrs = []string{front, ctlFront}
	fmt.Printf("traffic: %d long-lived connections, lognormal rates (median %.0f B/s, sigma %.1f), mean life %s\n",
		t.Conns, t.Median, t.Sigma, t.Lifetime)
	tctx, cancel := context.WithCancel(ctx)
	d.traffic = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		loadlab.RunTraffic(tctx, t)
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
		d.weigher.Stop(10 * time.Second)
	}
	for _, h := range []*loadlab.Child{d.haproxy, d.ctl} {
		if h != nil {
			h.Stop(5 * time.Second)
		}
	}
	loadlab.CloseSinks(d.sinks)
	loadlab.CloseSinks(d.ctlSink)
}

// startHAProxy opens the sinks of one HAProxy and starts it. The child is returned even
// with an error, so that stop() can end it.
func (d *demo) startHAProxy(ctx context.Context, hap, name, socket string) ([]*loadlab.Sink, *loadlab.Child, string, error) {
	sinks, err := loadlab.StartSinks(d.o.Servers, false)
	if err != nil {
		return nil, nil, "", err
	}
	front, err := freeport.Loopback()
	if err != nil {
		return sinks, nil, "", err
	}
	conf := haproxyConf{Socket: socket, Frontend: front, Weight: 100}
	for _, s := range sinks {
		conf.Servers = append(conf.Servers, haproxyServer{Name: s.Name, Addr: s.Addr()})
	}
	cfg, err := writeHAProxyConfig(filepath.Join(d.dir, name+".cfg"), conf)
	if err != nil {
		return sinks, nil, "", err
	}
	logPath := filepath.Join(d.dir, name+".log")
	h, err := loadlab.StartChild(name, logPath, hap, "-db", "-f", cfg)
	if err != nil {
		return sinks, nil, "", err
	}
	ready := func(ctx context.Context) error {
		st, err := showStat(ctx, socket)
		if err == nil && len(st) != len(sinks) {
			err = fmt.Errorf("%d of %d servers in show stat", len(st), len(sinks))
		}
		return err
	}
	if err := h.WaitReady(ctx, 10*time.Second, ready); err != nil {
		return sinks, h, "", fmt.Errorf("%w\n%s", err, tail(logPath))
	}
	return sinks, h, front, nil
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

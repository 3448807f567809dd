// The demo program shows haproxy-weighter at work on this machine, with nothing but
// HAProxy installed: it starts N sink servers, a real HAProxy (leastconn) in front of
// them, and a traffic generator of long-lived connections with heavy-tailed rates.
// Phase 1 runs without weighting, phase 2 with `haproxy-weighter run` reading HAProxy's
// own bytes_in counters. It prints each server's load and weight live, a before/after
// summary (max/mean load), writes a picture, and stops every process it started.
//
// Run it with `make demo` (which installs HAProxy if missing and builds the binary).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
)

// options are the demo's flags.
type options struct {
	Weighter string
	HAProxy  string
	Dir      string
	Out      string
	Servers  int
	Traffic  loadlab.TrafficConfig
	Phase1   time.Duration
	Phase2   time.Duration
	Interval time.Duration
	Window   time.Duration
	Function string
	Policy   string
	PerConn  bool
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.Weighter, "weighter", "bin/haproxy-weighter", "haproxy-weighter binary (make build)")
	flag.StringVar(&o.HAProxy, "haproxy", "", "haproxy binary (default: from PATH or /usr/sbin/haproxy)")
	flag.StringVar(&o.Dir, "dir", "", "working directory for configs, socket and logs (default: a new temp dir, removed at exit)")
	flag.StringVar(&o.Out, "out", filepath.Join(os.TempDir(), "haproxy-weighter-demo.png"), "picture to write (.png or .svg); empty: none (make demo: bin/demo.png)")
	flag.IntVar(&o.Servers, "servers", 8, "number of backend servers")
	flag.IntVar(&o.Traffic.Conns, "conns", 240, "long-lived connections kept open")
	flag.Float64Var(&o.Traffic.Median, "median-rate", 2000, "median rate of one connection, bytes/s")
	flag.Float64Var(&o.Traffic.Sigma, "sigma", 1.5, "lognormal sigma of connection rates (heavier tail when larger)")
	flag.Float64Var(&o.Traffic.MaxRate, "max-rate", 100000, "cap on one connection's rate, bytes/s")
	flag.DurationVar(&o.Traffic.Lifetime, "lifetime", 20*time.Second, "mean lifetime of a connection (exponential)")
	flag.Uint64Var(&o.Traffic.Seed, "seed", 1, "random seed of the traffic generator")
	flag.DurationVar(&o.Phase1, "phase1", 40*time.Second, "duration without weighting")
	flag.DurationVar(&o.Phase2, "phase2", 80*time.Second, "duration with haproxy-weighter")
	// HAProxy's contstats advance each connection's counters about every 5 s, so the
	// rate must span two of those steps (rate_window 10s); reading it every 2 s keeps
	// the lag short. The simulator's choice (docs/research/simulator-sweep.md, section 3).
	flag.DurationVar(&o.Interval, "interval", 2*time.Second, "haproxy-weighter interval")
	flag.DurationVar(&o.Window, "rate-window", 10*time.Second, "span of the HAProxy stats source's rates (source rate_window)")
	flag.StringVar(&o.Function, "function", "limited-proportions", "weighting function")
	flag.BoolVar(&o.PerConn, "per-connection", true, "weight by load per connection (source per_connection)")
	flag.StringVar(&o.Policy, "policy", "", `more policy keys for the backend, "key: value; key: value" (e.g. "smoothing: 10s")`)
	flag.Parse()
	return o
}

func main() {
	o := parseFlags()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, o)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo: interrupted; everything it started is stopped")
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// findHAProxy resolves the haproxy binary, which Debian puts in /usr/sbin (often not in
// a non-root PATH).
func findHAProxy(flagValue string) (string, error) {
	p, err := loadlab.FindHAProxy(flagValue)
	if err != nil {
		return "", errors.New("haproxy not found: install it with `apt-get install haproxy` (make demo does)")
	}
	return p, nil
}

// workDir returns the demo's directory and a cleanup that removes it if the demo made it.
func workDir(dir string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	d, err := os.MkdirTemp("", "haproxy-weighter-demo-")
	if err != nil {
		return "", nil, fmt.Errorf("make work dir: %w", err)
	}
	return d, func() { os.RemoveAll(d) }, nil
}

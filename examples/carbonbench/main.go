// Command carbonbench (`make bench-carbon`) measures, on real Debian graphite-carbon,
// whether haproxy-weighter splits a few heavy carbon-relays that each hold one
// connection for hours: 4 carbon-cache instances behind HAProxy 2.6 (the pin table's two
// lines in the backend), 8 carbon-relay instances sending 2,000 / 2,000 / 200 / 150 /
// 120 / 60 / 40 / 20 datapoints/s each over one long-lived connection from its own
// source address 127.0.0.11-18, both 2,000/s relays on the first cache at the start (as a
// lottery would put them), and the daemon on examples/config/graphite-carbon.yaml
// (carbon's own metricsReceived, scale(…, 1/interval)).
//
// Arms, one after the other on a fresh carbon, HAProxy and relays each: leastconn (no
// daemon), default (the example config, pin: false), shed (the same with shed: {above:
// 1.5}) and pin+shed (shed, pinning on: the daemon given HAProxy's configuration file,
// where it finds the listener). It prints, per arm and minute, each cache's received
// datapoints/s (carbon's own counts) and their max/mean, where the heavy relays are, and
// the datapoints sent against those the caches received.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	Weighter string
	HAProxy  string
	Example  string
	Dir      string
	Out      string
	Arms     string
	Rates    string
	Duration time.Duration
	Interval time.Duration // carbon's CARBON_METRIC_INTERVAL
	Caches   int

	hapBin string
	rates  []float64
	arms   []arm
}

// arm is one way of balancing the relays.
type arm struct {
	Name   string
	Daemon bool // haproxy-weighter runs
	Shed   bool // shed: {above: 1.5}
	Pin    bool // pinning on (else pin: false)
	Says   string
}

var allArms = []arm{
	{Name: "leastconn", Says: "HAProxy's leastconn alone, no daemon"},
	{Name: "default", Daemon: true, Says: "the example config without its shed line, pin: false (weights only; the table is there for the start's placement)"},
	{Name: "shed", Daemon: true, Shed: true, Says: "the example config with its shed: {above: 1.5}, pin: false"},
	{Name: "pin+shed", Daemon: true, Shed: true, Pin: true, Says: "the example config as it is: shed: {above: 1.5} and pinning (run --haproxy-config <the arm's haproxy.cfg>)"},
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("carbonbench", flag.ContinueOnError)
	fs.StringVar(&o.Weighter, "weighter", "bin/haproxy-weighter", "haproxy-weighter binary (make build)")
	fs.StringVar(&o.HAProxy, "haproxy", "", "haproxy binary (default: from PATH or /usr/sbin/haproxy)")
	fs.StringVar(&o.Example, "example", "examples/config/graphite-carbon.yaml", "the daemon's config, run with this bench's socket, Graphite and caches")
	fs.StringVar(&o.Dir, "dir", "", "working directory (configs, logs, carbon's storage), kept (default: a temp dir, removed at exit)")
	fs.StringVar(&o.Out, "out", "bin/bench-carbon.txt", "file the printed result is written to too; empty: none")
	fs.StringVar(&o.Arms, "arms", "leastconn,default,shed,pin+shed", "arms to run, in order: leastconn, default, shed, pin+shed")
	fs.StringVar(&o.Rates, "rates", "2000,2000,200,150,120,60,40,20", "each relay's datapoints/s (the first two start on the first cache)")
	fs.DurationVar(&o.Duration, "duration", 6*time.Minute, "each arm's run")
	fs.DurationVar(&o.Interval, "interval", 10*time.Second, "carbon's CARBON_METRIC_INTERVAL (the example's scale() is 1/interval); whole seconds dividing a minute")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.Caches = 4
	for _, s := range strings.Split(o.Rates, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || r <= 0 {
			return o, fmt.Errorf("-rates: %q is not a rate", s)
		}
		o.rates = append(o.rates, r)
	}
	for _, name := range strings.Split(o.Arms, ",") {
		found := false
		for _, a := range allArms {
			if a.Name == strings.TrimSpace(name) {
				o.arms, found = append(o.arms, a), true
			}
		}
		if !found {
			return o, fmt.Errorf("-arms: no arm %q (leastconn, default, shed, pin+shed)", name)
		}
	}
	switch {
	case len(o.rates) < 2 || len(o.rates) > 200:
		return o, errors.New("-rates: 2 to 200 relays")
	case o.Interval < time.Second || o.Interval%time.Second != 0 || time.Minute%o.Interval != 0:
		return o, errors.New("-interval: whole seconds that divide a minute")
	case o.Duration < time.Minute:
		return o, errors.New("-duration: at least a minute")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-carbon:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench-carbon:", err)
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, stdout io.Writer) error {
	var err error
	if _, err = os.Stat(o.Weighter); err != nil {
		return fmt.Errorf("haproxy-weighter binary: %w (run `make build` first)", err)
	}
	if o.hapBin, err = findHAProxy(o.HAProxy); err != nil {
		return err
	}
	example, err := os.ReadFile(o.Example)
	if err != nil {
		return err
	}
	host, err := carbonHost(ctx)
	if err != nil {
		return err
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "haproxy-weighter-carbonbench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	var result strings.Builder
	w := io.MultiWriter(stdout, &result)
	began := time.Now()
	fmt.Fprintf(w, "bench-carbon %s, weighter %s\n", began.UTC().Format("2006-01-02 15:04 MST"), firstLine(o.Weighter, "version"))
	fmt.Fprintf(w, "%s; %s; carbon-cache ×%d (CARBON_METRIC_INTERVAL %s) behind it, backend with %q; %d carbon-relay, each one connection (line protocol) from its own 127.0.0.N through a forwarder, sending %s datapoints/s; the first two pinned to cache-a by hand until they connect, then the table emptied\n",
		firstLine(o.hapBin, "-v"), graphiteVersion(ctx), o.Caches, o.Interval, pinLines, len(o.rates), o.Rates)
	fmt.Fprintf(w, "daemon: %s run --config <%s with this bench's socket, Graphite, caches and scale(…, %s)>\n\n", o.Weighter, o.Example, scaleOf(o.Interval))
	var results []armResult
	for _, a := range o.arms {
		fmt.Fprintf(stdout, "arm %s: %s; running for %s ...\n", a.Name, a.Says, o.Duration)
		r, err := runArm(ctx, o, a, example, host, filepath.Join(dir, strings.ReplaceAll(a.Name, "+", "-")))
		if err != nil {
			return fmt.Errorf("arm %s: %w", a.Name, err)
		}
		results = append(results, r)
		writeArm(w, o, r)
	}
	writeSummary(w, o, results)
	fmt.Fprintf(w, "run time %s\n", time.Since(began).Round(time.Second))
	if o.Out != "" {
		if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(o.Out, []byte(result.String()), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "written to %s\n", o.Out)
	}
	return nil
}

// scaleOf is the example's scale() factor for a metric interval: 1/interval.
func scaleOf(interval time.Duration) string {
	return strconv.FormatFloat(1/interval.Seconds(), 'g', 6, 64)
}

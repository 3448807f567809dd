// Command benchbalance (`make bench-balance`) measures how evenly haproxy-weighter, run
// as the README's quick start runs it, spreads long-lived connections of heavy-tailed
// rates, against leastconn alone and against an oracle placement.
//
// Each seed's run has 3 × 8 sink servers, three real HAProxies (leastconn, admin socket,
// no contstats) and one set of clients that opens one connection to each HAProxy at the
// same moment, with the same rate and lifetime:
//
//   - control: never weighted;
//   - weighted: driven by `haproxy-weighter run` with the quick start's flags, reading a
//     real Prometheus that scrapes the sinks' datapoints_received_total every 15 s;
//   - oracle: the client connects to the HAProxy port of the server an oracle chose,
//     the server whose open connections' known rates sum to the least.
//
// It prints p50 and p90 of max/mean load (datapoints/s) over 10 s windows for each, and
// the share of the control → oracle gap the weighted HAProxy closes.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
)

type options struct {
	Weighter   string
	HAProxy    string
	Prometheus string
	Readme     string
	Command    string
	Dir        string
	Out        string
	Seeds      string
	Duration   time.Duration
	Warmup     time.Duration
	Window     time.Duration
	Scrape     time.Duration
	Servers    int
	Traffic    loadlab.TrafficConfig

	hapBin, promBin string
	seeds           []uint64
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("benchbalance", flag.ContinueOnError)
	fs.StringVar(&o.Weighter, "weighter", "bin/haproxy-weighter", "haproxy-weighter binary (make build)")
	fs.StringVar(&o.HAProxy, "haproxy", "", "haproxy binary (default: from PATH or /usr/sbin/haproxy)")
	fs.StringVar(&o.Prometheus, "prometheus", "", "prometheus binary (default: from PATH or /usr/bin/prometheus)")
	fs.StringVar(&o.Readme, "readme", "README.md", "README whose Quick start gives the weighter's command line")
	fs.StringVar(&o.Command, "quickstart-command", "run", "which quick-start command's flags to run: run, or once (its flags given to `run`)")
	fs.StringVar(&o.Dir, "dir", "", "working directory for configs, sockets, logs and Prometheus' data (default: a new temp dir, removed at exit)")
	fs.StringVar(&o.Out, "out", "bin/bench-balance.txt", "file the printed result is written to too; empty: none")
	fs.StringVar(&o.Seeds, "seeds", "1,2,3", "traffic seeds, one run each, comma-separated")
	fs.DurationVar(&o.Duration, "duration", 5*time.Minute, "length of each seed's run")
	fs.DurationVar(&o.Warmup, "warmup", 60*time.Second, "first part of each run left out of the figures")
	fs.DurationVar(&o.Window, "window", 10*time.Second, "window of the max/mean load")
	fs.DurationVar(&o.Scrape, "scrape-interval", 15*time.Second, "Prometheus scrape interval")
	fs.IntVar(&o.Servers, "servers", 8, "servers behind each HAProxy")
	fs.IntVar(&o.Traffic.Conns, "conns", 240, "long-lived connections kept open (to each HAProxy)")
	fs.Float64Var(&o.Traffic.Median, "median-rate", 2000, "median rate of one connection, bytes/s (50 bytes per datapoint)")
	fs.Float64Var(&o.Traffic.Sigma, "sigma", 1.5, "lognormal sigma of connection rates")
	fs.Float64Var(&o.Traffic.MaxRate, "max-rate", 100000, "cap on one connection's rate, bytes/s")
	fs.DurationVar(&o.Traffic.Lifetime, "lifetime", 20*time.Second, "mean lifetime of a connection (exponential)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, s := range strings.Split(o.Seeds, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return o, fmt.Errorf("-seeds: %q is not a seed", s)
		}
		o.seeds = append(o.seeds, n)
	}
	switch {
	case o.Command != "once" && o.Command != "run":
		return o, fmt.Errorf("-quickstart-command: once or run, not %q", o.Command)
	case o.Warmup+o.Window > o.Duration:
		return o, errors.New("-duration must leave at least one window after -warmup")
	case o.Servers < 2 || o.Traffic.Conns < 1:
		return o, errors.New("-servers must be 2 or more and -conns 1 or more")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-balance:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = run(ctx, o, os.Stdout)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "bench-balance: interrupted; everything it started is stopped")
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-balance:", err)
		os.Exit(1)
	}
}

// run measures every seed in turn and prints (and writes to o.Out) the figures.
func run(ctx context.Context, o options, stdout io.Writer) error {
	var err error
	if _, err = os.Stat(o.Weighter); err != nil {
		return fmt.Errorf("haproxy-weighter binary: %w (run `make build` first)", err)
	}
	if o.hapBin, err = loadlab.FindHAProxy(o.HAProxy); err != nil {
		return err
	}
	if o.promBin, err = findPrometheus(o.Prometheus); err != nil {
		return err
	}
	qs, err := readQuickStart(o.Readme, o.Command)
	if err != nil {
		return err
	}
	if err := checkQuickStart(qs); err != nil {
		return err
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "haproxy-weighter-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	var result bytes.Buffer
	w := io.MultiWriter(stdout, &result)
	began := time.Now()
	fmt.Fprintf(w, "bench-balance %s, tree at commit %s, weighter %s\n", began.UTC().Format("2006-01-02 15:04 MST"), gitCommit(), firstLine(o.Weighter, "version"))
	fmt.Fprintf(w, "weighted HAProxy: %s %s\n", o.Weighter, quote(weighterArgs(qs.Args, "<socket>", "<prometheus>", "<free port>")))
	fmt.Fprintf(w, "  from %s's Quick start: %s\n", filepath.Base(o.Readme), qs.Line)
	fmt.Fprintf(w, "%s (leastconn, no weights set, no contstats) ×3; %s scraping the sinks every %s\n",
		firstLine(o.hapBin, "-v"), firstLine(o.promBin, "--version"), o.Scrape)
	t := o.Traffic
	fmt.Fprintf(w, "traffic: %d long-lived connections to each HAProxy, lognormal rates (median %.0f datapoints/s, sigma %.1f, cap %.0f/s), mean life %s\n",
		t.Conns, t.Median/float64(len(datapoint)), t.Sigma, t.MaxRate/float64(len(datapoint)), t.Lifetime)
	fmt.Fprintf(w, "oracle: each connection to the server with the least sum of known rates (its own HAProxy, one port per server)\n")
	fmt.Fprintf(w, "seeds %s, %s each; max/mean of %d servers' datapoints/s over %s windows from %s to %s\n\n",
		o.Seeds, o.Duration, o.Servers, o.Window, o.Warmup, o.Duration)
	var all []figures
	var notes []string
	for _, seed := range o.seeds {
		fmt.Fprintf(stdout, "seed %d: running for %s ...\n", seed, o.Duration)
		res, err := runSeed(ctx, o, qs, seed, filepath.Join(dir, fmt.Sprintf("seed-%d", seed)), stdout)
		if err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
		f := figuresOf(strconv.FormatUint(seed, 10), res.Snaps, o.Warmup, o.Duration, o.Window)
		all = append(all, f)
		writeTableHeader(stdout)
		writeRow(stdout, f)
		note := fmt.Sprintf("seed %d: %d windows; weights changed between %d of %d reads (every 5 s), last: %s",
			seed, f.Windows, res.Changes, res.WeightReads, strings.Join(res.LastWeights, " "))
		if res.Late > len(res.Snaps)/20 {
			note += fmt.Sprintf("; %d of %d one-second samples came late (busy machine)", res.Late, len(res.Snaps))
		}
		if res.Changes == 0 {
			note += "\n  the weighter's last log lines:\n" + res.LogTail
		}
		notes = append(notes, note)
		fmt.Fprintln(stdout, note)
	}
	fmt.Fprintln(w)
	writeTableHeader(w)
	for _, f := range all {
		writeRow(w, f)
	}
	if len(all) > 1 {
		writeRow(w, meanOf(all))
	}
	fmt.Fprintf(w, "(gap closed: (control − weighted) / (control − oracle); the mean row's from the mean figures)\n")
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	fmt.Fprintf(w, "run time %s\n", time.Since(began).Round(time.Second))
	if o.Out != "" {
		if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(o.Out, result.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "written to %s\n", o.Out)
	}
	return nil
}

// checkQuickStart refuses a quick start this harness cannot serve: its sinks export only
// datapoints_received_total with a server label.
func checkQuickStart(qs quickStart) error {
	for _, f := range []string{"--backend", "--prometheus-url", "--query", "--server-label"} {
		if _, ok := flagValue(qs.Args, f); !ok {
			return fmt.Errorf("README quick start %q has no %s: this harness needs a Prometheus source", qs.Line, f)
		}
	}
	q, _ := flagValue(qs.Args, "--query")
	label, _ := flagValue(qs.Args, "--server-label")
	if !strings.Contains(q, metricName) || label != "server" {
		return fmt.Errorf("README quick start %q: the sinks export %s{server=...}, not what it queries", qs.Line, metricName)
	}
	return nil
}

// gitCommit is the checked-out commit, "+changes" when the tree differs from it.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " (+ uncommitted changes in the tree)"
	}
	return c
}

// firstLine runs bin with args and returns the first line of its output.
func firstLine(bin string, args ...string) string {
	out, _ := exec.Command(bin, args...).CombinedOutput()
	l, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if l == "" {
		return filepath.Base(bin)
	}
	return l
}

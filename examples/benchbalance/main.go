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
//
// -scenario long-lived-burst is the production world instead: clients living an
// hour on average, each from its own loopback address, three heavy clients connecting
// within a second at 180 s, and six arms: leastconn, the quick start as shipped
// (default), the README's minimal config with its shed line on (shed), each of those two
// with the pin table's two lines in its HAProxy backend and the weighter given that
// HAProxy's configuration file (pin, pin+shed), and the oracle.
// It prints the same figures per arm, and the lines lost, sheds per hour per server and
// heavy clients on one server; -scenario drift has 30 % of the clients change rate ×10
// or ÷10 once during the run instead of the burst; -scenario many has as many clients as
// the open-file limit allows (8 descriptors a client in this process with 4 arms: many.go)
// on 16 servers, the lab's rates scaled to the lab's total, and no burst; -scenario
// restart stops and starts every arm's HAProxy at 180 s (same config and socket, no
// server-state file) and its clients all reconnect within 5 s (restart.go); -scenario
// short-lived is the lab's world (20 s clients, no burst, a 5 min run) with the production
// arms and clients from their own addresses. -returning, on any but the lab: a client that
// leaves comes back from its address with its rate, for a new life, as a relay or an agent
// does (what a pin is for); without it a new client from a new address takes its place.
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

	Scenario     string
	HeavyClients int
	HeavyRate    float64 // lines/s
	BurstAt      time.Duration
	BurstWithin  time.Duration
	DriftShare   float64

	RestartAt     time.Duration
	RestartWithin time.Duration

	Ramp time.Duration // the first clients connect at uniform moments within it

	Returning bool // a client that leaves comes back from its address with its rate

	manyWhy string // -scenario many: how many clients and why

	hapBin, promBin string
	seeds           []uint64
	sc              scenario
	arms            []armSpec
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("benchbalance", flag.ContinueOnError)
	fs.StringVar(&o.Weighter, "weighter", "bin/haproxy-weighter", "haproxy-weighter binary (make build)")
	fs.StringVar(&o.HAProxy, "haproxy", "", "haproxy binary (default: from PATH or /usr/sbin/haproxy)")
	fs.StringVar(&o.Prometheus, "prometheus", "", "prometheus binary (default: from PATH or /usr/bin/prometheus)")
	fs.StringVar(&o.Readme, "readme", "README.md", "README whose Quick start gives the weighter's command line")
	fs.StringVar(&o.Command, "quickstart-command", "run", "which quick-start command's flags to run: run, or once (its flags given to `run`)")
	fs.StringVar(&o.Dir, "dir", "", "working directory for configs, sockets, logs, Prometheus' data and each seed's trace (seed-N/windows.tsv, drifts.tsv; docs/research/bench-balance.md) (default: a new temp dir, removed at exit)")
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
	fs.DurationVar(&o.Traffic.Lifetime, "lifetime", 20*time.Second, "mean lifetime of a connection (exponential); production scenarios: 1h unless given")
	fs.StringVar(&o.Scenario, "scenario", scenarioLab, "lab (3 arms, 20 s clients), long-lived-burst (the production world: 1 h clients from their own addresses, 3 heavy ones at 180 s; leastconn, default, default + shed, pin, pin + shed, oracle) drift (1 h clients, 30 % change rate ×10 or ÷10 once) many (1 h clients, as many as the open-file limit allows, 16 servers, no burst), restart (1 h clients; every HAProxy restarts at -restart-at, its clients reconnect within -restart-within) or short-lived (the lab's 20 s clients and 5 min with the six production arms, each client from its own address)")
	fs.BoolVar(&o.Returning, "returning", false, "every scenario but lab: a client that leaves comes back from its own address with its rate after 0.1-2 s, for a new life (a relay, an agent: what a pin is for); without it, a new client from a new address takes its place")
	fs.DurationVar(&o.RestartAt, "restart-at", 180*time.Second, "restart: when every arm's HAProxy restarts")
	fs.DurationVar(&o.RestartWithin, "restart-within", 5*time.Second, "restart: each client reconnects after a uniform delay within this")
	fs.IntVar(&o.HeavyClients, "heavy", 3, "long-lived-burst: heavy clients connecting together")
	fs.Float64Var(&o.HeavyRate, "heavy-rate", 6000, "long-lived-burst: each heavy client's rate, datapoints (lines)/s")
	fs.DurationVar(&o.BurstAt, "burst-at", 180*time.Second, "long-lived-burst: when the heavy clients connect")
	fs.DurationVar(&o.BurstWithin, "burst-within", time.Second, "long-lived-burst: the heavy clients connect within this")
	fs.DurationVar(&o.Ramp, "ramp", 0, "production scenarios: the first clients connect at uniform moments within this, each placed by the weights of its moment, as on a balancer whose clients arrived over hours (default: -warmup; 0: all within the first 100 ms, a cold start before any weight: the placement is leastconn's in every arm)")
	fs.Float64Var(&o.DriftShare, "drift-share", 0.3, "drift: share of the clients whose rate changes ×10 or ÷10 (a coin) at a uniform moment between -warmup and -duration")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	sc, ok := scenarios[o.Scenario]
	if !ok {
		return o, fmt.Errorf("-scenario: lab, %s, %s, %s, %s or %s, not %q", scenarioBurst, scenarioDrift, scenarioMany, scenarioRestart, scenarioShort, o.Scenario)
	}
	o.sc, o.arms = sc, sc.arms
	if o.Scenario == scenarioLab && o.Returning {
		return o, errors.New("-returning: the lab's clients all connect from 127.0.0.1; use -scenario short-lived for its world with clients of their own addresses")
	}
	if o.Scenario != scenarioLab {
		// The production world's defaults: hour-long clients, a run of 6 min
		// (short-lived keeps the lab's 20 s and 5 min).
		if !given["lifetime"] && o.Scenario != scenarioShort {
			o.Traffic.Lifetime = time.Hour
		}
		if !given["duration"] && o.Scenario != scenarioShort {
			o.Duration = 6 * time.Minute
		}
		if o.Scenario != scenarioBurst && !given["heavy"] {
			o.HeavyClients = 0
		}
		if !given["ramp"] {
			o.Ramp = o.Warmup
		}
	}
	if o.Scenario == scenarioMany {
		// The production world's many: as many connections as the descriptors allow (many.go).
		if !given["servers"] {
			o.Servers = 16
		}
		soft, _, err := raiseNoFile()
		if err != nil {
			return o, fmt.Errorf("open-file limit: %w", err)
		}
		most, why := manyConns(soft, len(o.arms))
		switch {
		case !given["conns"]:
			o.Traffic.Conns, o.manyWhy = most, why
		case o.Traffic.Conns > most:
			return o, fmt.Errorf("-conns %d: more than the open-file limit allows (%s)", o.Traffic.Conns, why)
		default:
			o.manyWhy = fmt.Sprintf("%d clients: -conns (the open-file limit would allow %d)", o.Traffic.Conns, most)
		}
		// The lab's lognormal rates (sigma, cap over median) scaled so that all the clients
		// together send what the lab's 240 do: 4 HAProxies and their sinks at 2,450 clients of
		// the lab's rates (60 MB/s) saturate a 2-core machine; max/mean depends on the rates'
		// shape, not their scale.
		if scale := 240 / float64(o.Traffic.Conns); scale < 1 && !given["median-rate"] && !given["max-rate"] {
			o.Traffic.Median *= scale
			o.Traffic.MaxRate *= scale
			o.manyWhy += fmt.Sprintf("; the lab's rates ×240/%d (median %.2f datapoints/s, cap %.0f/s), so that all together send what the lab's 240 clients do",
				o.Traffic.Conns, o.Traffic.Median/float64(len(datapoint)), o.Traffic.MaxRate/float64(len(datapoint)))
		}
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
	case o.Ramp < 0:
		return o, errors.New("-ramp must be 0 or more")
	case o.HeavyClients < 0 || o.HeavyRate <= 0 || o.DriftShare < 0 || o.DriftShare > 1:
		return o, errors.New("-heavy must be 0 or more, -heavy-rate positive and -drift-share in [0, 1]")
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
	if err := writeScenarioHeader(w, o, qs); err != nil {
		return err
	}
	var all, before, after []figures // before, after: -scenario restart's windows on each side of the restart
	var prod []prodSeed
	var notes []string
	for _, seed := range o.seeds {
		fmt.Fprintf(stdout, "seed %d: running for %s ...\n", seed, o.Duration)
		res, err := runSeed(ctx, o, qs, seed, filepath.Join(dir, fmt.Sprintf("seed-%d", seed)))
		if err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
		f := figuresOf(strconv.FormatUint(seed, 10), len(o.arms), res.Snaps, o.Warmup, o.Duration, o.Window)
		all = append(all, f)
		split := o.restartSplit(seed, res.Snaps)
		if split != nil {
			before, after = append(before, split[0]), append(after, split[1])
		}
		if o.Scenario == scenarioLab {
			writeTableHeader(stdout)
			writeRow(stdout, f)
		} else {
			prod = append(prod, prodSeed{f: f, res: res})
			writeProdTable(stdout, o.arms, append([]figures{f}, split...))
			writeProdLines(stdout, o, prod[len(prod)-1:])
		}
		note := fmt.Sprintf("seed %d: %d windows; weights changed between %d of %d reads (every 5 s), last: %s",
			seed, f.Windows, res.Changes, res.WeightReads, strings.Join(res.LastWeights, " "))
		if res.Late > len(res.Snaps)/20 {
			note += fmt.Sprintf("; %d of %d one-second samples came late (busy machine)", res.Late, len(res.Snaps))
		}
		if res.Restart != "" {
			note += "; " + res.Restart
		}
		if res.Reader != "" {
			note += "; fast signal reader " + res.Reader
		}
		if len(res.ShedLog) > 0 {
			note += fmt.Sprintf("\n  sheds (time after the traffic started, server, client, datapoints/s): %s", strings.Join(res.ShedLog, "\n    "))
		}
		for _, p := range res.PinLog {
			note += "\n  pins, " + p
		}
		if res.Changes == 0 {
			note += "\n  the weighter's last log lines:\n" + res.LogTail
		}
		notes = append(notes, note)
		fmt.Fprintln(stdout, note)
	}
	fmt.Fprintln(w)
	rows := all
	if len(all) > 1 {
		rows = append(rows, meanOf(all))
	}
	rows = append(rows, splitRows(before, after)...)
	if o.Scenario == scenarioLab {
		writeTableHeader(w)
		for _, f := range rows {
			writeRow(w, f)
		}
		fmt.Fprintf(w, "(gap closed: (control − weighted) / (control − oracle); the mean row's from the mean figures)\n")
	} else {
		writeProdTable(w, o.arms, rows)
		fmt.Fprintf(w, "(gap closed: (leastconn − arm) / (leastconn − oracle); the mean row's from the mean figures)\n\n")
		writeProdLines(w, o, prod)
		heavy := ""
		if o.HeavyClients > 0 {
			heavy = fmt.Sprintf("heavy on one server: the most of the %d heavy clients on one server at %s (the end of the first window after the burst) / at the end; ",
				o.HeavyClients, o.heavyReadAt())
		}
		fmt.Fprintf(w, "(lines lost: written by the clients (accepted by the kernel) − received by the arm's sinks once the clients closed and the sinks drained; "+
			"sheds/h/server: the weighter's haproxy_weighter_sessions_shed_total over %s × %d servers; %s"+
			"fast signal: the weighter's haproxy_weighter_fast_signal_reader at the end)\n",
			o.Duration, o.Servers, heavy)
	}
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

// writeScenarioHeader says what runs: the weighters' command lines, the HAProxies,
// Prometheus, the traffic and the figures.
func writeScenarioHeader(w io.Writer, o options, qs quickStart) error {
	hap, prom := firstLine(o.hapBin, "-v"), firstLine(o.promBin, "--version")
	t := o.Traffic
	if o.Scenario == scenarioLab {
		fmt.Fprintf(w, "weighted HAProxy: %s %s\n", o.Weighter, quote(weighterArgs(qs.Args, "<socket>", "<prometheus>", "<free port>")))
		fmt.Fprintf(w, "  from %s's Quick start: %s\n", filepath.Base(o.Readme), qs.Line)
		fmt.Fprintf(w, "%s (leastconn, no weights set, no contstats) ×3; %s scraping the sinks every %s\n", hap, prom, o.Scrape)
		fmt.Fprintf(w, "traffic: %d long-lived connections to each HAProxy, lognormal rates (median %.0f datapoints/s, sigma %.1f, cap %.0f/s), mean life %s\n",
			t.Conns, t.Median/float64(len(datapoint)), t.Sigma, t.MaxRate/float64(len(datapoint)), t.Lifetime)
		fmt.Fprintf(w, "oracle: each connection to the server with the least sum of known rates (its own HAProxy, one port per server)\n")
		fmt.Fprintf(w, "seeds %s, %s each; max/mean of %d servers' datapoints/s over %s windows from %s to %s\n\n",
			o.Seeds, o.Duration, o.Servers, o.Window, o.Warmup, o.Duration)
		return nil
	}
	b, err := os.ReadFile(o.Readme)
	if err != nil {
		return err
	}
	cfg, err := shedConfig(string(b), qs, "<socket>", "<prometheus>")
	if err != nil {
		return err
	}
	shedLine := ""
	for _, l := range strings.Split(cfg, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "shed:") {
			shedLine, _, _ = strings.Cut(t, " #")
			shedLine = strings.TrimSpace(shedLine)
		}
	}
	fmt.Fprintf(w, "scenario %s\n", o.Scenario)
	fmt.Fprintf(w, "default: %s %s\n", o.Weighter, quote(weighterArgs(qs.Args, "<socket>", "<prometheus>", "<free port>")))
	fmt.Fprintf(w, "  from %s's Quick start: %s\n", filepath.Base(o.Readme), qs.Line)
	fmt.Fprintf(w, "shed: %s run --config <file> --listen <free port>: %s's minimal config (Quick start) with its socket and Prometheus, and its commented shed line on: %s\n",
		o.Weighter, filepath.Base(o.Readme), shedLine)
	fmt.Fprintf(w, "pin: default + --haproxy-config <the arm's haproxy.cfg>, whose backend has the two lines %q (the daemon pins heavy clients by default when it has the table and finds the listeners)\n", pinTableLines)
	fmt.Fprintf(w, "pin+shed: shed + --haproxy-config <the arm's haproxy.cfg>, the same two lines in its backend\n")
	fmt.Fprintf(w, "%s (leastconn, no weights set, no contstats, timeouts %s) ×%d; one %s per weighted arm, scraping its sinks every %s\n",
		hap, o.sc.haproxyTimeout, len(o.arms), prom, o.Scrape)
	leaves := "a client that leaves is replaced by a new one from a new address"
	if o.Returning {
		leaves = "-returning: a client that leaves comes back from its address with its rate after 0.1-2 s, for a new life"
	}
	fmt.Fprintf(w, "traffic: %d clients, each from its own address 127.x.y.z with one connection to each HAProxy, lognormal rates (median %.3g datapoints/s, sigma %.1f, cap %.0f/s), mean life %s (%s)\n",
		t.Conns, t.Median/float64(len(datapoint)), t.Sigma, t.MaxRate/float64(len(datapoint)), t.Lifetime, leaves)
	if o.Ramp > loadlab.Tick {
		fmt.Fprintf(w, "arrival: the first %d clients connect at uniform moments within %s (-ramp), each placed by its arm as of its moment, as on a balancer whose clients arrived over hours; the figures start at %s\n",
			t.Conns, o.Ramp, o.Warmup)
	} else {
		fmt.Fprintf(w, "arrival: the first %d clients connect within %s (-ramp 0: a cold start, every arm placing them before any weight)\n", t.Conns, loadlab.Tick)
	}
	if o.HeavyClients > 0 {
		fmt.Fprintf(w, "burst: %d heavy clients of %.0f datapoints/s (%.0fx the median client) from 127.200.0.x connect within %s at %s and stay to the end\n",
			o.HeavyClients, o.HeavyRate, o.HeavyRate/(t.Median/float64(len(datapoint))), o.BurstWithin, o.BurstAt)
	}
	if o.Scenario == scenarioRestart {
		fmt.Fprintf(w, "restart: at %s every arm's HAProxy is stopped (SIGTERM: every connection closed) and started again on the same config and socket, no server-state file "+
			"(runtime weights back to the config's) and no peers section (a pin arm's table starts empty: its weighter writes the pins again); each client reconnects after a uniform delay within %s (the oracle's placed again by the oracle)\n", o.RestartAt, o.RestartWithin)
	}
	if o.manyWhy != "" {
		fmt.Fprintf(w, "many: %s\n", o.manyWhy)
	}
	if o.Scenario == scenarioDrift {
		fmt.Fprintf(w, "drift: %.0f %% of the clients change rate ×10 or ÷10 (a coin) once, at a uniform moment between %s and %s\n", 100*o.DriftShare, o.Warmup, o.Duration)
	}
	fmt.Fprintf(w, "a client whose connection to one arm breaks (a shed) reconnects to that arm alone, from its address, and resends up to 2 s of lines it could not write\n")
	fmt.Fprintf(w, "oracle: each connection to the server with the least sum of known rates (its own HAProxy, one port per server)\n")
	fmt.Fprintf(w, "seeds %s, %s each; max/mean of %d servers' datapoints/s over %s windows from %s to %s\n\n",
		o.Seeds, o.Duration, o.Servers, o.Window, o.Warmup, o.Duration)
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

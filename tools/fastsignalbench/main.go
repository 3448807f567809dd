// Command fastsignalbench measures what each way of reading the fast signal costs HAProxy and
// the daemon (the kernel reader's goals, docs/benchmarks.md "Fast signal: what each read costs HAProxy"):
//
//	go run ./tools/fastsignalbench [-conns 1000,5000,10000] [-duration 60s] [-interval 2s] \
//	    [-method none,kernel,sess,stat] [-rounds 3] [-out bin/bench-fastsignal.md]
//
// For each number of connections it starts a real HAProxy (nbthread 2: a TCP frontend to a
// leastconn backend of 8 servers, and a probe frontend to an echo server), opens that many
// long-lived client connections through it that each send a little data every few seconds,
// and then, for each method, reads every interval for the duration:
//
//   - none: no reader (the baseline);
//   - kernel: the kernel's socket table (sockdiag.Reader.Read with the servers' addresses);
//   - sess: `show sess all` through haproxy.RuntimeBackend.ReadLocal, the dump and parse the daemon
//     makes (its budget set so that every read dumps);
//   - stat: `show stat` through haproxy.Client.Stats.
//
// It measures HAProxy's CPU (utime+stime from /proc/<pid>/stat) against the none baseline,
// a probe's round trip through HAProxy every 20 ms (p50/p99/max), the reader's own CPU
// (getrusage of this whole process over the windows, so the garbage collection a read causes
// counts too) and allocations (runtime.MemStats around each read), and whether each read
// finished within the interval. The duration is split into rounds that alternate the methods,
// so that load from other work on the machine falls on each method alike.
//
// Processes: this one only reads (so its CPU is the reader's); the servers (sinks and the
// echo server) and the clients (connections, their writes and the probe) run in two child
// processes of this same binary, each holding one end of every connection: a process may
// hold only RLIMIT_NOFILE descriptors, and HAProxy needs two per connection. A size above
// what HAProxy's descriptor limit allows is lowered to the largest that fits, and says so.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the command line's.
type options struct {
	conns      []int
	duration   time.Duration
	interval   time.Duration
	rounds     int
	methods    []string
	haproxy    string
	nbthread   int
	servers    int
	sendEvery  time.Duration
	probeEvery time.Duration
	settle     time.Duration
	out        string
}

// allMethods in the order each round runs them: the baseline first.
var allMethods = []string{"none", "kernel", "sess", "stat"}

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	opts, err := parseOptions(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fastsignalbench:", err)
		os.Exit(2)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		slog.Error("fastsignalbench failed", "err", err)
		os.Exit(1)
	}
}

func parseOptions(args []string) (options, error) {
	fs := flag.NewFlagSet("fastsignalbench", flag.ContinueOnError)
	var o options
	conns := fs.String("conns", "1000,5000,10000", "numbers of open client connections, comma-separated (each lowered to what the descriptor limit allows)")
	methods := fs.String("method", strings.Join(allMethods, ","), "methods to compare: none (no reader), kernel (socket table), sess (show sess all), stat (show stat)")
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long each method reads, per size (split into -rounds)")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "time between two reads (the daemon's cycle)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds the duration is split into; each runs every method once, in turn")
	fs.StringVar(&o.haproxy, "haproxy", "haproxy", "HAProxy binary (Debian 12's is 2.6)")
	fs.IntVar(&o.nbthread, "nbthread", 2, "HAProxy's threads")
	fs.IntVar(&o.servers, "servers", 8, "servers in the measured backend")
	fs.DurationVar(&o.sendEvery, "send-every", 5*time.Second, "each client connection sends 64 bytes this often (its stream stays live)")
	fs.DurationVar(&o.probeEvery, "probe-every", 20*time.Millisecond, "time between two probe round trips through HAProxy")
	fs.DurationVar(&o.settle, "settle", 5*time.Second, "wait after the connections are open, before measuring")
	fs.StringVar(&o.out, "out", "", "also write the report (Markdown) to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.conns, err = parseSizes(*conns); err != nil {
		return o, err
	}
	if o.methods, err = parseMethods(*methods); err != nil {
		return o, err
	}
	switch {
	case o.interval <= 0 || o.duration < o.interval:
		return o, fmt.Errorf("-interval %s must be positive and at most -duration %s", o.interval, o.duration)
	case o.rounds < 1 || o.duration/time.Duration(o.rounds) < o.interval:
		return o, fmt.Errorf("-rounds %d: each round (-duration/-rounds) must last at least one -interval", o.rounds)
	case o.nbthread < 1 || o.servers < 1 || o.sendEvery <= 0 || o.probeEvery <= 0:
		return o, errors.New("-nbthread, -servers, -send-every and -probe-every must be positive")
	}
	return o, nil
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-conns: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseMethods keeps allMethods' order whatever the flag's, so the baseline runs first.
func parseMethods(s string) ([]string, error) {
	var asked []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allMethods, f) {
			return nil, fmt.Errorf("-method: unknown %q (want some of %s)", f, strings.Join(allMethods, ","))
		}
		asked = append(asked, f)
	}
	var out []string
	for _, m := range allMethods {
		if slices.Contains(asked, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// run measures every size and writes the report.
func run(ctx context.Context, o options) error {
	hard, err := raiseFileLimit()
	if err != nil {
		return err
	}
	env, err := describeEnvironment(o)
	if err != nil {
		return err
	}
	began := time.Now()
	var results []sizeResult
	for _, asked := range o.conns {
		n := fitConns(asked, hard)
		if n != asked {
			slog.Warn("fewer connections than asked: HAProxy needs two descriptors per connection",
				"asked", asked, "measured", n, "hard_RLIMIT_NOFILE", hard)
		}
		r, err := measureSize(ctx, o, asked, n)
		if err != nil {
			return fmt.Errorf("%d connections: %w", n, err)
		}
		results = append(results, r)
	}
	env.took = time.Since(began)
	return writeReport(o, env, results)
}

// raiseFileLimit sets this process's soft RLIMIT_NOFILE to its hard limit (HAProxy and the
// children inherit it) and returns the hard limit. Raising the hard limit itself needs
// CAP_SYS_RESOURCE, which a container often lacks.
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", lim.Max, err)
	}
	return lim.Max, nil
}

// fitConns lowers n to what HAProxy can hold under the hard descriptor limit: HAProxy refuses
// to start unless its limit covers two descriptors per maxconn (n plus maxconnSpare) and a
// few of its own; rounded down to a hundred.
func fitConns(n int, hard uint64) int {
	most := (int(min(hard, 1<<30))-64)/2 - maxconnSpare
	if n <= most {
		return n
	}
	return most / 100 * 100
}

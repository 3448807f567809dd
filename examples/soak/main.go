// Command soak runs the daemon for a long time at a large size and prints what it holds
// (docs/benchmarks.md "Soak: memory at 1,000 servers every 1 s"):
//
//	go run ./examples/soak [-servers 1000] [-interval 1s] [-conns 0] \
//	    [-duration 1h] [-every 10m] [-bin bin/haproxy-weighter] [-out bin/soak.md]
//
// It starts a real HAProxy (one TCP backend of -servers servers, each a sink listener of
// its own on a loopback port), a real Prometheus that scrapes a generated, noisy gauge per
// server from this process every 2 s, and the daemon's `run` at -interval with the
// Prometheus source and the default fast signal (the kernel's socket table). With -conns,
// that many long-lived client connections go through HAProxy (round robin, so each server
// holds a few), each sending a few hundred bytes every 1-5 s.
//
// Every -every (and once at the first minute, so that a climb shows from the start) it
// samples the daemon: RSS (VmRSS of /proc/<pid>/status), heap in use and goroutines (its
// /metrics: go_memstats_heap_inuse_bytes, go_goroutines), open descriptors (/proc/<pid>/fd),
// CPU (utime+stime over the period), the mean and largest-bucket cycle time over the period
// (haproxy_weighter_cycle_duration_seconds) and the warnings and errors it logged in the
// period. It prints a Markdown table at the end (and each row as it is taken).
//
// It is a benchmark, not a test: it asserts nothing, and its figures depend on the machine.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
	"github.com/haproxy-weighter/haproxy-weighter/internal/freeport"
)

type options struct {
	servers    int
	interval   time.Duration
	conns      int
	duration   time.Duration
	every      time.Duration
	bin        string
	haproxy    string
	prometheus string
	dir        string
	out        string
	gogc       string
	memlimit   string
}

func main() {
	var o options
	flag.IntVar(&o.servers, "servers", 1000, "servers in the one backend")
	flag.DurationVar(&o.interval, "interval", time.Second, "the daemon's interval")
	flag.IntVar(&o.conns, "conns", 0, "long-lived client connections through HAProxy (0: no traffic)")
	flag.DurationVar(&o.duration, "duration", time.Hour, "how long the daemon runs")
	flag.DurationVar(&o.every, "every", 10*time.Minute, "sample the daemon this often (and once at the first minute)")
	flag.StringVar(&o.bin, "bin", "bin/haproxy-weighter", "the daemon binary (make build)")
	flag.StringVar(&o.haproxy, "haproxy", "", "haproxy binary (default: from PATH or /usr/sbin)")
	flag.StringVar(&o.prometheus, "prometheus", "", "prometheus binary (default: from PATH or /usr/bin)")
	flag.StringVar(&o.dir, "dir", "", "work directory for configs and logs (default: a temporary one, removed)")
	flag.StringVar(&o.out, "out", "", "also write the table to this file")
	flag.StringVar(&o.gogc, "gogc", "", "GOGC for the daemon (default: its own)")
	flag.StringVar(&o.memlimit, "gomemlimit", "", "GOMEMLIMIT for the daemon (default: its own)")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		slog.Error("soak failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.servers < 1 || o.interval <= 0 || o.every <= 0 || o.duration < o.every {
		return errors.New("need -servers >= 1, -interval > 0, -every > 0 and -duration >= -every")
	}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("daemon binary: %w (make build)", err)
	}
	haproxyBin, err := loadlab.FindHAProxy(o.haproxy)
	if err != nil {
		return err
	}
	promBin := o.prometheus
	if promBin == "" {
		if promBin, err = exec.LookPath("prometheus"); err != nil {
			promBin = "/usr/bin/prometheus"
		}
	}
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "soak-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	sinks, err := loadlab.StartSinks(o.servers, false)
	if err != nil {
		return err
	}
	defer loadlab.CloseSinks(sinks)

	// HAProxy: one frontend, one backend of every sink.
	feAddr, err := freeport.Loopback()
	if err != nil {
		return err
	}
	sock := filepath.Join(dir, "haproxy.sock")
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `global
    stats socket %s mode 600 level admin
    maxconn %d
    nbthread 2
defaults
    mode tcp
    timeout connect 5s
    timeout client 1h
    timeout server 1h
frontend fe
    bind %s
    default_backend be
backend be
    balance roundrobin
`, sock, 2*o.conns+1000, feAddr)
	for _, s := range sinks {
		fmt.Fprintf(&cfg, "    server %s %s weight 128\n", serverName(s), s.Addr())
	}
	cfgPath := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		return err
	}
	hap, err := loadlab.StartChild("haproxy", filepath.Join(dir, "haproxy.log"), haproxyBin, "-db", "-f", cfgPath)
	if err != nil {
		return err
	}
	defer hap.Stop(5 * time.Second)
	if err := hap.WaitReady(ctx, 20*time.Second, func(ctx context.Context) error {
		_, err := loadlab.RuntimeCommand(ctx, sock, "show info")
		return err
	}); err != nil {
		return err
	}

	// The noisy source: a gauge per server, generated on each scrape, scraped by a real Prometheus.
	gen, err := startGenerator(sinks)
	if err != nil {
		return err
	}
	defer gen.Close()
	promAddr, err := freeport.Loopback()
	if err != nil {
		return err
	}
	promCfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 2s
  scrape_timeout: 2s
scrape_configs:
  - job_name: soak
    static_configs:
      - targets: ['%s']
`, gen.Addr().String())), 0o644); err != nil {
		return err
	}
	prom, err := loadlab.StartChild("prometheus", filepath.Join(dir, "prometheus.log"), promBin,
		"--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "prom-data"),
		"--web.listen-address="+promAddr, "--storage.tsdb.retention.time=1d")
	if err != nil {
		return err
	}
	defer prom.Stop(10 * time.Second)
	promURL := "http://" + promAddr
	if err := prom.WaitReady(ctx, 60*time.Second, loadlab.HTTPOK(promURL+"/-/ready")); err != nil {
		return err
	}
	// Wait for the first scrape, so that the daemon starts with data.
	if err := prom.WaitReady(ctx, 30*time.Second, func(ctx context.Context) error {
		return promHasData(ctx, promURL)
	}); err != nil {
		return err
	}

	if o.conns > 0 {
		cctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		if err := openClients(cctx, &wg, feAddr, o.conns); err != nil {
			return err
		}
		slog.Info("clients connected", "conns", o.conns)
	}

	// The daemon.
	listen, err := freeport.Loopback()
	if err != nil {
		return err
	}
	dcfg := filepath.Join(dir, "weighter.yaml")
	if err := os.WriteFile(dcfg, []byte(fmt.Sprintf(`interval: %s
listen: %s
haproxy:
  socket: %s
backends:
  - name: be
    source:
      prometheus:
        url: %s
        query: soak_load
        server_label: server
        timeout: 5s
`, o.interval, listen, sock, promURL)), 0o644); err != nil {
		return err
	}
	dlog := filepath.Join(dir, "weighter.log")
	cmd := exec.Command(bin, "run", "--config", dcfg)
	cmd.Env = os.Environ()
	if o.gogc != "" {
		cmd.Env = append(cmd.Env, "GOGC="+o.gogc)
	}
	if o.memlimit != "" {
		cmd.Env = append(cmd.Env, "GOMEMLIMIT="+o.memlimit)
	}
	lf, err := os.Create(dlog)
	if err != nil {
		return err
	}
	defer lf.Close()
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	metricsURL := "http://" + listen + "/metrics"
	start := time.Now()
	slog.Info("soak started", "servers", o.servers, "interval", o.interval, "conns", o.conns,
		"duration", o.duration, "every", o.every, "pid", pid, "dir", dir)

	title := fmt.Sprintf("soak: %d servers every %s, %d connections, %s (%s, %s, %s, %d CPUs, GOGC %s, GOMEMLIMIT %s)",
		o.servers, o.interval, o.conns, o.duration, time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		firstLine(haproxyBin, "-v"), runtime.Version(), runtime.NumCPU(), orDefault(o.gogc), orDefault(o.memlimit))
	header := "| minute | RSS MB | heap in use MB | goroutines | FDs | CPU % | cycle mean ms | cycle p99 ≤ ms | cycles | warn/error lines | load (1 min) |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
	fmt.Printf("%s\n\n%s", title, header)
	var rows strings.Builder
	prev := sample{at: start}
	var logOff int64
	marks := []time.Duration{time.Minute}
	for t := o.every; t <= o.duration; t += o.every {
		if t > time.Minute {
			marks = append(marks, t)
		}
	}
	for _, m := range marks {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			return fmt.Errorf("daemon exited: %v\n%s", err, tailFile(dlog))
		case <-time.After(time.Until(start.Add(m))):
		}
		s, err := take(ctx, pid, metricsURL)
		if err != nil {
			return err
		}
		var warns int
		warns, logOff = countWarnings(dlog, logOff)
		row := formatRow(m, prev, s, warns)
		rows.WriteString(row)
		fmt.Print(row)
		prev = s
	}
	table := title + "\n\n" + header + rows.String()
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(table), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("\n%s", table)
	return nil
}

func serverName(s *loadlab.Sink) string {
	n, _ := strconv.Atoi(strings.TrimPrefix(s.Name, "s"))
	return fmt.Sprintf("s%04d", n)
}

// startGenerator serves soak_load{server="s0001"}: each server's base load (lognormal,
// drawn once) times a fresh ±30 % noise on every scrape, so the calibration sees a source
// that never holds still.
func startGenerator(sinks []*loadlab.Sink) (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	base := make([]float64, len(sinks))
	for i := range base {
		base[i] = 1000 * math.Exp(rng.NormFloat64()*0.5)
	}
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		b.WriteString("# TYPE soak_load gauge\n")
		mu.Lock()
		for i, s := range sinks {
			fmt.Fprintf(&b, "soak_load{server=%q} %.3f\n", serverName(s), base[i]*(0.7+0.6*rng.Float64()))
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, b.String())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln, nil
}

func promHasData(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/query?query=count(soak_load)", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"value":[`) {
		return errors.New("no soak_load yet")
	}
	return nil
}

// openClients opens n connections to addr, each writing 200-600 bytes every 1-5 s until ctx ends.
func openClients(ctx context.Context, wg *sync.WaitGroup, addr string, n int) error {
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return fmt.Errorf("client %d: %w", i, err)
		}
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			defer c.Close()
			rng := rand.New(rand.NewPCG(seed, 7))
			buf := make([]byte, 600)
			for {
				if _, err := c.Write(buf[:200+rng.IntN(400)]); err != nil {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))):
				}
			}
		}(uint64(i))
		if i%100 == 99 {
			time.Sleep(20 * time.Millisecond) // let HAProxy accept at its pace
		}
	}
	return nil
}

// sample is one reading of the daemon.
type sample struct {
	at         time.Time
	rssKB      int64
	heapInuse  float64
	goroutines float64
	fds        int
	cpuTicks   int64
	cycleSum   float64
	cycleCount float64
	buckets    map[float64]float64 // cumulative counts by upper bound
}

func take(ctx context.Context, pid int, metricsURL string) (sample, error) {
	s := sample{at: time.Now(), buckets: map[float64]float64{}}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			s.rssKB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
		f := strings.Fields(string(stat)[i+2:])
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			k, _ := strconv.ParseInt(f[12], 10, 64)
			s.cpuTicks = u + k
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("daemon metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, val, ok := splitSample(line)
		if !ok {
			continue
		}
		switch {
		case name == "go_memstats_heap_inuse_bytes":
			s.heapInuse = val
		case name == "go_goroutines":
			s.goroutines = val
		case strings.HasPrefix(name, "haproxy_weighter_cycle_duration_seconds_sum"):
			s.cycleSum += val
		case strings.HasPrefix(name, "haproxy_weighter_cycle_duration_seconds_count"):
			s.cycleCount += val
		case strings.HasPrefix(name, "haproxy_weighter_cycle_duration_seconds_bucket"):
			if i := strings.Index(name, `le="`); i >= 0 {
				le := name[i+4:]
				le = le[:strings.IndexByte(le, '"')]
				ub, err := strconv.ParseFloat(le, 64)
				if err == nil {
					s.buckets[ub] += val
				}
			}
		}
	}
	return s, sc.Err()
}

// splitSample splits `name{labels} value` into its name with labels and its value.
func splitSample(line string) (string, float64, bool) {
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(line[i+1:], 64)
	if err != nil {
		return "", 0, false
	}
	return line[:i], v, true
}

func formatRow(at time.Duration, prev, s sample, warns int) string {
	n := s.cycleCount - prev.cycleCount
	mean, p99 := math.NaN(), math.NaN()
	if n > 0 {
		mean = (s.cycleSum - prev.cycleSum) / n * 1000
		// The smallest bucket bound that holds 99 % of the period's cycles.
		var bounds []float64
		for ub := range s.buckets {
			bounds = append(bounds, ub)
		}
		slices.Sort(bounds)
		for _, ub := range bounds {
			if s.buckets[ub]-prev.buckets[ub] >= 0.99*n {
				p99 = ub * 1000
				break
			}
		}
	}
	wall := s.at.Sub(prev.at).Seconds()
	cpu := float64(s.cpuTicks-prev.cpuTicks) / 100 / wall * 100 // USER_HZ is 100 on Linux
	return fmt.Sprintf("| %d | %.1f | %.1f | %.0f | %d | %.1f | %.1f | %s | %.0f | %d | %s |\n",
		int(at.Minutes()), float64(s.rssKB)/1024, s.heapInuse/(1<<20), s.goroutines, s.fds, cpu, mean,
		fmtBound(p99), n, warns, loadAvg())
}

// loadAvg is the machine's 1-minute load average: cycle times on a shared machine follow it.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func fmtBound(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// countWarnings counts the WARN and ERROR lines the daemon logged after offset off.
func countWarnings(path string, off int64) (int, int64) {
	f, err := os.Open(path)
	if err != nil {
		return 0, off
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, off
	}
	n := 0
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // a partial last line is counted next time
		}
		off += int64(len(line))
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			n++
		}
	}
	return n, off
}

// orDefault names an environment value the daemon is left to choose.
func orDefault(v string) string {
	if v == "" {
		return "the daemon's default"
	}
	return v
}

// firstLine is the first line a command prints ("" if it fails).
func firstLine(bin string, args ...string) string {
	out, _ := exec.Command(bin, args...).Output()
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

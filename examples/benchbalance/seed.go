package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
	"github.com/haproxy-weighter/haproxy-weighter/internal/freeport"
)

// datapoint is the line every client sends over and over: one datapoint, 50 bytes, so a
// connection of the median rate (2,000 B/s) sends 40 datapoints/s.
var datapoint = []byte(fmt.Sprintf("%-49s\n", "bench.ingest.value 42 1764547200"))

// armRun is one arm of a seed's run: its sinks and HAProxy and, for a weighted arm, the
// exporter of its sinks, its own Prometheus and its weighter (each weighted arm is
// another user's servers: nothing is shared between them).
type armRun struct {
	spec    armSpec
	sinks   []*loadlab.Sink
	hap     *loadlab.Child
	socket  string   // HAProxy's admin socket
	fronts  []string // frontend addresses (the oracle's: one per server)
	exp     *exporter
	prom    *loadlab.Child
	weigher *loadlab.Child
	listen  string // the weighter's /metrics and /healthz
	logPath string // the weighter's log
}

// lab is one seed's run: one HAProxy per arm fed the same clients, and each weighted
// arm's Prometheus and weighter. stop ends whatever was started.
type lab struct {
	o       options
	dir     string
	arms    []*armRun
	backend string
	traffic context.CancelFunc
	wg      sync.WaitGroup
}

// seedResult is what one seed's run measured.
type seedResult struct {
	Snaps       []snapshot
	Late        int      // one-second samples taken more than 1.5 s after the previous
	WeightReads int      // reads of the (first) weighted HAProxy's weights
	Changes     int      // reads whose weights differ from the read before
	LastWeights []string // "s1=12" ...
	LogTail     string   // the weighter's last log lines
	Reader      string   // the lab's weighter's fast_signal_reader at the end

	// The production scenarios' figures, per arm (production.go).
	Sent, Received []int64   // lines the clients wrote / the sinks received, over the whole run
	Sheds          []float64 // the arm's weighter's sessions_shed_total (NaN: no weighter)
	Readers        []string  // the arm's weighter's fast_signal_reader ("" : no weighter)
	HeavyAfter     []int     // most heavy clients on one server at the end of the first window after the burst (-1: not read)
	HeavyEnd       []int     // the same at the end of the run
	ShedLog        []string  // the shedding arms' sheds, as their weighters logged them ("arm: ...")
	PinLog         []string  // the pinning arms' pins, as their weighters logged them ("arm: ...")
	Restart        string    // -scenario restart: when the HAProxies restarted and how long it took
}

// runSeed runs one seed for o.Duration and returns its samples; it always stops what it
// started.
func runSeed(ctx context.Context, o options, qs quickStart, seed uint64, dir string) (seedResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return seedResult{}, err
	}
	l := &lab{o: o, dir: dir}
	defer l.stop()
	if err := l.start(ctx, qs); err != nil {
		return seedResult{}, err
	}
	var direct []string // the arms clients dial directly, in arm order
	var orc *oracle
	for _, a := range l.arms {
		if a.spec.Kind == kindOracle {
			orc = newOracle(a.fronts)
		} else {
			direct = append(direct, a.fronts[0])
		}
	}
	tctx, cancel := context.WithCancel(ctx)
	l.traffic = cancel
	var prod *prodTraffic
	if o.Scenario == scenarioLab {
		t := o.Traffic
		t.Seed = seed
		t.Addrs = direct
		t.Place = orc.place
		t.Payload = datapoint
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			loadlab.RunTraffic(tctx, t)
		}()
	} else {
		prod = newProdTraffic(o, seed, direct, orc.place)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			prod.run(tctx)
		}()
	}
	res, err := l.sample(ctx, prod)
	if err == nil && prod != nil {
		err = l.finish(ctx, prod, &res)
	}
	if err == nil {
		err = l.writeTrace(res.Snaps, prod)
	}
	if w := l.firstWeighted(); err == nil && prod == nil && w != nil {
		// The lab's note says which fast signal the weighter read.
		if m, merr := scrapeWeighter(ctx, w.listen); merr == nil {
			res.Reader = m.reader
		}
	}
	l.stop()
	if w := l.firstWeighted(); w != nil {
		res.LogTail = lastLines(w.logPath, 3)
	}
	return res, err
}

// writeTrace writes the seed's windows.tsv (writeWindows) and, with drifts, drifts.tsv
// into its directory.
func (l *lab) writeTrace(snaps []snapshot, prod *prodTraffic) error {
	names := make([]string, len(l.arms))
	for i, a := range l.arms {
		names[i] = a.spec.Name
	}
	var b bytes.Buffer
	if err := writeWindows(&b, names, snaps, l.o.Window); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(l.dir, "windows.tsv"), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if prod == nil || prod.driftShare == 0 {
		return nil
	}
	b.Reset()
	if err := prod.writeDrifts(&b); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(l.dir, "drifts.tsv"), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// firstWeighted is the first weighted arm (the lab's weighted, production's default).
func (l *lab) firstWeighted() *armRun {
	for _, a := range l.arms {
		if a.spec.Kind == kindWeighted {
			return a
		}
	}
	return nil
}

// start opens every arm's sinks and HAProxy and every weighted arm's exporter,
// Prometheus and weighter.
func (l *lab) start(ctx context.Context, qs quickStart) error {
	l.backend, _ = flagValue(qs.Args, "--backend")
	for _, spec := range l.o.arms {
		a := &armRun{spec: spec}
		l.arms = append(l.arms, a)
		var err error
		if a.sinks, err = loadlab.StartSinks(l.o.Servers, true); err != nil {
			return err
		}
		a.hap, a.fronts, err = startHAProxy(ctx, haproxyConf{
			Socket: filepath.Join(l.dir, spec.Name+".sock"), Backend: l.backend,
			Placed: spec.Kind == kindOracle, Pin: spec.Pin, Timeout: l.o.sc.haproxyTimeout,
			Maxconn: haproxyMaxconn(l.o.Traffic.Conns),
		}, l.o.hapBin, l.dir, spec.Name, a.sinks)
		if err != nil {
			return err
		}
		a.socket = filepath.Join(l.dir, spec.Name+".sock")
	}
	for _, a := range l.arms {
		if a.spec.Kind != kindWeighted {
			continue
		}
		if err := l.startWeighter(ctx, qs, a); err != nil {
			return err
		}
	}
	return nil
}

// startWeighter starts a weighted arm's exporter, Prometheus and weighter: the quick
// start's `run` flags, or for a shedding arm the README's minimal config with its shed
// line on; both with this arm's socket, Prometheus and a free /metrics port.
func (l *lab) startWeighter(ctx context.Context, qs quickStart, a *armRun) error {
	var err error
	if a.exp, err = startExporter(a.sinks); err != nil {
		return err
	}
	var promURL string
	a.prom, promURL, err = startPrometheus(ctx, l.o.promBin, l.dir, a.spec.Name+"-prometheus", a.exp.addr, l.o.Scrape)
	if err != nil {
		return err
	}
	if a.listen, err = freeport.Loopback(); err != nil {
		return err
	}
	args := weighterArgs(qs.Args, a.socket, promURL, a.listen)
	if a.spec.Shed {
		path := filepath.Join(l.dir, a.spec.Name+"-weighter.yaml")
		if err := writeShedConfig(l.o.Readme, qs, path, a.socket, promURL); err != nil {
			return err
		}
		args = []string{"run", "--config", path, "--listen", a.listen}
	}
	if a.spec.Pin {
		// Where the daemon finds the listeners whose clients it measures (the frontend's
		// bind): the arm's own HAProxy file, with the pin table's two lines.
		args = append(args, "--haproxy-config", filepath.Join(l.dir, a.spec.Name+".cfg"))
	}
	a.logPath = filepath.Join(l.dir, a.spec.Name+"-weighter.log")
	a.weigher, err = loadlab.StartChild(a.spec.Name+" haproxy-weighter", a.logPath, l.o.Weighter, args...)
	if err != nil {
		return err
	}
	if err := a.weigher.WaitReady(ctx, 15*time.Second, loadlab.HTTPOK("http://"+a.listen+"/healthz")); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(a.logPath))
	}
	return nil
}

// weighterArgs are the quick start's arguments with this run's admin socket, Prometheus
// and metrics address (the quick start's default port may be taken on a shared machine).
func weighterArgs(quick []string, socket, promURL, listen string) []string {
	args := withFlag(quick, "--socket", socket)
	args = withFlag(args, "--prometheus-url", promURL)
	return withFlag(args, "--listen", listen)
}

// sample takes a snapshot of every sink each second, and reads the (first) weighted
// HAProxy's weights every 5 s, for o.Duration. With production traffic, it also reads
// where the heavy clients are at the end of the first window after their burst.
func (l *lab) sample(ctx context.Context, prod *prodTraffic) (seedResult, error) {
	var res seedResult
	start := time.Now()
	prevAt := start
	var prevWeights []string
	weighted := l.firstWeighted()
	heavyRead := prod == nil || l.o.HeavyClients == 0
	restarted := prod == nil || l.o.Scenario != scenarioRestart
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	snap := func(now time.Time) snapshot {
		s := snapshot{T: now.Sub(start), Lines: make([][]int64, len(l.arms)), Open: make([][]int, len(l.arms))}
		for i, a := range l.arms {
			s.Lines[i], s.Open[i] = loadlab.ReadLines(a.sinks), loadlab.ReadOpen(a.sinks)
		}
		return s
	}
	res.Snaps = append(res.Snaps, snap(start))
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case now := <-tk.C:
			res.Snaps = append(res.Snaps, snap(now))
			if now.Sub(prevAt) > 1500*time.Millisecond {
				res.Late++
			}
			prevAt = now
		}
		if n%5 == 0 && weighted != nil {
			if st, err := loadlab.ShowStat(ctx, weighted.socket, l.backend); err == nil {
				ws := make([]string, 0, len(st))
				for _, s := range weighted.sinks {
					ws = append(ws, fmt.Sprintf("%s=%d", s.Name, st[s.Name].Weight))
				}
				res.WeightReads++
				if prevWeights != nil && !slices.Equal(ws, prevWeights) {
					res.Changes++
				}
				prevWeights, res.LastWeights = ws, ws
			}
		}
		if !restarted && time.Since(start) >= l.o.RestartAt {
			began := time.Now()
			if err := l.restartHAProxies(ctx); err != nil {
				return res, err
			}
			restarted = true
			res.Restart = fmt.Sprintf("HAProxies restarted at %s in %s", began.Sub(start).Round(100*time.Millisecond), time.Since(began).Round(10*time.Millisecond))
		}
		if !heavyRead && time.Since(start) >= l.o.heavyReadAt() {
			res.HeavyAfter, heavyRead = l.heavyPerArm(ctx), true
		}
		if err := l.exited(); err != nil {
			return res, err
		}
		if time.Since(start) >= l.o.Duration {
			return res, nil
		}
	}
}

// exited is an error naming the first child that has ended, with its log's tail.
func (l *lab) exited() error {
	for _, a := range l.arms {
		if ok, err := a.hap.Exited(); ok {
			return fmt.Errorf("%s haproxy exited: %v\n%s", a.spec.Name, err, tail(filepath.Join(l.dir, a.spec.Name+".log")))
		}
		if a.weigher == nil {
			continue
		}
		if ok, err := a.weigher.Exited(); ok {
			return fmt.Errorf("%s haproxy-weighter exited: %v\n%s", a.spec.Name, err, tail(a.logPath))
		}
		if ok, err := a.prom.Exited(); ok {
			return fmt.Errorf("%s prometheus exited: %v\n%s", a.spec.Name, err, tail(filepath.Join(l.dir, a.spec.Name+"-prometheus.log")))
		}
	}
	return nil
}

// stop ends every part in order: clients, weighters, Prometheus, exporters, HAProxies,
// sinks. Safe after a partial start and when called twice.
func (l *lab) stop() {
	if l.traffic != nil {
		l.traffic()
		l.wg.Wait()
		l.traffic = nil
	}
	for _, a := range l.arms {
		if a.weigher != nil {
			a.weigher.Stop(10 * time.Second)
		}
	}
	for _, a := range l.arms {
		if a.prom != nil {
			a.prom.Stop(15 * time.Second)
		}
		if a.exp != nil {
			a.exp.close()
			a.exp = nil
		}
	}
	for _, a := range l.arms {
		if a.hap != nil {
			a.hap.Stop(5 * time.Second)
		}
		loadlab.CloseSinks(a.sinks)
		a.sinks = nil
	}
}

// lastLines returns the last n lines of a file, indented.
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-n):]
	return "    " + strings.Join(lines, "\n    ")
}

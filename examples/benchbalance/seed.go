package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
)

// datapoint is the line every client sends over and over: one datapoint, 50 bytes, so a
// connection of the median rate (2,000 B/s) sends 40 datapoints/s.
var datapoint = []byte(fmt.Sprintf("%-49s\n", "bench.ingest.value 42 1764547200"))

// lab is one seed's run: three HAProxies fed the same clients, the weighted one's sinks
// scraped by Prometheus, and the weighter. stop ends whatever was started.
type lab struct {
	o       options
	dir     string
	sinks   [nArms][]*loadlab.Sink
	haps    [nArms]*loadlab.Child
	socket  string // the weighted HAProxy's admin socket
	backend string
	exp     *exporter
	prom    *loadlab.Child
	weigher *loadlab.Child
	traffic context.CancelFunc
	wg      sync.WaitGroup
}

// seedResult is what one seed's run measured.
type seedResult struct {
	Snaps       []snapshot
	Late        int      // one-second samples taken more than 1.5 s after the previous
	WeightReads int      // reads of the weighted HAProxy's weights
	Changes     int      // reads whose weights differ from the read before
	LastWeights []string // "s1=12" ...
	LogTail     string   // the weighter's last log lines
}

// runSeed runs one seed for o.Duration and returns its samples; it always stops what it
// started.
func runSeed(ctx context.Context, o options, qs quickStart, seed uint64, dir string, w io.Writer) (seedResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return seedResult{}, err
	}
	l := &lab{o: o, dir: dir}
	defer l.stop()
	fronts, err := l.start(ctx, qs)
	if err != nil {
		return seedResult{}, err
	}
	orc := newOracle(fronts[armOracle])
	t := o.Traffic
	t.Seed = seed
	t.Addrs = []string{fronts[armControl][0], fronts[armWeighted][0]}
	t.Place = orc.place
	t.Payload = datapoint
	tctx, cancel := context.WithCancel(ctx)
	l.traffic = cancel
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		loadlab.RunTraffic(tctx, t)
	}()
	res, err := l.sample(ctx)
	l.stop()
	res.LogTail = lastLines(filepath.Join(dir, "weighter.log"), 3)
	return res, err
}

// start opens the sinks, the exporter, Prometheus, the three HAProxies and the weighter,
// and returns each arm's frontend addresses (the oracle's: one per server).
func (l *lab) start(ctx context.Context, qs quickStart) ([nArms][]string, error) {
	var fronts [nArms][]string
	for a := range nArms {
		s, err := loadlab.StartSinks(l.o.Servers, true)
		if err != nil {
			return fronts, err
		}
		l.sinks[a] = s
	}
	var err error
	if l.exp, err = startExporter(l.sinks[armWeighted]); err != nil {
		return fronts, err
	}
	var promURL string
	l.prom, promURL, err = startPrometheus(ctx, l.o.promBin, l.dir, l.exp.addr, l.o.Scrape)
	if err != nil {
		return fronts, err
	}
	l.backend, _ = flagValue(qs.Args, "--backend")
	for a, name := range armNames {
		var h *loadlab.Child
		h, fronts[a], err = startHAProxy(ctx, l.o.hapBin, l.dir, name, l.backend, l.sinks[a], a == armOracle)
		l.haps[a] = h
		if err != nil {
			return fronts, err
		}
	}
	l.socket = filepath.Join(l.dir, armNames[armWeighted]+".sock")
	listen, err := loadlab.FreePort()
	if err != nil {
		return fronts, err
	}
	args := weighterArgs(qs.Args, l.socket, promURL, listen)
	logPath := filepath.Join(l.dir, "weighter.log")
	l.weigher, err = loadlab.StartChild("haproxy-weighter", logPath, l.o.Weighter, args...)
	if err != nil {
		return fronts, err
	}
	if err := l.weigher.WaitReady(ctx, 15*time.Second, httpOK("http://"+listen+"/healthz")); err != nil {
		return fronts, fmt.Errorf("%w\n%s", err, tail(logPath))
	}
	return fronts, nil
}

// weighterArgs are the quick start's arguments with this run's admin socket, Prometheus
// and metrics address (the quick start's default port may be taken on a shared machine).
func weighterArgs(quick []string, socket, promURL, listen string) []string {
	args := withFlag(quick, "--socket", socket)
	args = withFlag(args, "--prometheus-url", promURL)
	return withFlag(args, "--listen", listen)
}

// sample takes a snapshot of every sink each second, and reads the weighted HAProxy's
// weights every 5 s, for o.Duration.
func (l *lab) sample(ctx context.Context) (seedResult, error) {
	var res seedResult
	start := time.Now()
	prevAt := start
	var prevWeights []string
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	snap := func(now time.Time) snapshot {
		s := snapshot{T: now.Sub(start)}
		for a := range nArms {
			s.Lines[a] = loadlab.ReadLines(l.sinks[a])
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
		if n%5 == 0 {
			if st, err := loadlab.ShowStat(ctx, l.socket, l.backend); err == nil {
				ws := make([]string, 0, len(st))
				for _, s := range l.sinks[armWeighted] {
					ws = append(ws, fmt.Sprintf("%s=%d", s.Name, st[s.Name].Weight))
				}
				res.WeightReads++
				if prevWeights != nil && !slices.Equal(ws, prevWeights) {
					res.Changes++
				}
				prevWeights, res.LastWeights = ws, ws
			}
		}
		for a, h := range l.haps {
			if ok, err := h.Exited(); ok {
				return res, fmt.Errorf("%s haproxy exited: %v\n%s", armNames[a], err, tail(filepath.Join(l.dir, armNames[a]+".log")))
			}
		}
		if ok, err := l.weigher.Exited(); ok {
			return res, fmt.Errorf("haproxy-weighter exited: %v\n%s", err, tail(filepath.Join(l.dir, "weighter.log")))
		}
		if ok, err := l.prom.Exited(); ok {
			return res, fmt.Errorf("prometheus exited: %v\n%s", err, tail(filepath.Join(l.dir, "prometheus.log")))
		}
		if time.Since(start) >= l.o.Duration {
			return res, nil
		}
	}
}

// stop ends every part in order: clients, weighter, Prometheus, exporter, HAProxies,
// sinks. Safe after a partial start and when called twice.
func (l *lab) stop() {
	if l.traffic != nil {
		l.traffic()
		l.wg.Wait()
		l.traffic = nil
	}
	if l.weigher != nil {
		l.weigher.Stop(10 * time.Second)
	}
	if l.prom != nil {
		l.prom.Stop(15 * time.Second)
	}
	if l.exp != nil {
		l.exp.close()
		l.exp = nil
	}
	for _, h := range l.haps {
		if h != nil {
			h.Stop(5 * time.Second)
		}
	}
	for a := range l.sinks {
		loadlab.CloseSinks(l.sinks[a])
		l.sinks[a] = nil
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

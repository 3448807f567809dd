package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/freeport"
)

// readTimeout bounds one read: far above any interval measured, so that a slow read is
// measured (and counted late), not cut.
const readTimeout = 30 * time.Second

// window is one method's measurement during one round.
type window struct {
	wall, haproxyCPU, selfCPU time.Duration
	readCPU                   time.Duration // the reading thread's CPU during the reads
	// HAProxy's CPU from just before to just after each read, and those spans' length.
	duringCPU, duringSpan  time.Duration
	expected, made, onTime int // reads due, made, and made without error within the interval
	took                   []time.Duration
	allocs, bytes          uint64
	load                   float64 // 1-minute load average at the window's end
	errs                   int
	firstErr               error
}

// methodResult is one method at one size: its windows over every round and its probe.
type methodResult struct {
	method  string
	windows []window
	seen    int // connections its first read saw (-1: none)
	probe   probeStats
}

type probeStats struct {
	n             int
	p50, p99, max time.Duration
	// The round trips that overlapped a read: what a read itself does to HAProxy's traffic,
	// seen more sharply than in the p99 of every round trip on a machine with other work.
	nDuring              int
	p50During, p99During time.Duration
}

// sizeResult is every method at one number of connections.
type sizeResult struct {
	asked, conns int
	methods      []methodResult
	writeErrors  int
}

// measureSize starts the servers, HAProxy and the clients for n connections, and measures
// each method in turn, o.rounds times.
func measureSize(ctx context.Context, o options, asked, n int) (sizeResult, error) {
	res := sizeResult{asked: asked, conns: n}
	r, err := startRig(ctx, o, n)
	if r != nil {
		defer r.stop()
	}
	if err != nil {
		return res, err
	}
	readers, err := r.primeReaders(ctx, o.methods, &res)
	if err != nil {
		return res, err
	}
	per := o.duration / time.Duration(o.rounds)
	for round := range o.rounds {
		for i, rd := range readers {
			slog.Info("measuring", "conns", n, "round", round+1, "of", o.rounds, "method", rd.name, "for", per)
			w, err := r.window(ctx, rd, per, o.interval)
			if err != nil {
				return res, err
			}
			res.methods[i].windows = append(res.methods[i].windows, w)
		}
	}
	return res, collectProbe(ctx, r.clients, &res)
}

// rig is what one size runs on: the servers' process, HAProxy, the clients' process.
type rig struct {
	dir              string
	servers, clients *child
	hp               *haproxyProc
	socket           string
	addrs            map[string]netip.AddrPort // the backend's servers: s1… → address
}

// startRig starts everything for n connections and returns once HAProxy holds them all. On
// an error it returns what it started, for the caller to stop.
func startRig(ctx context.Context, o options, n int) (*rig, error) {
	dir, err := os.MkdirTemp("", "fastsignalbench-")
	if err != nil {
		return nil, err
	}
	r := &rig{dir: dir, socket: filepath.Join(dir, "admin.sock"), addrs: map[string]netip.AddrPort{}}
	if r.servers, err = startChild("servers", "-sinks", strconv.Itoa(o.servers)); err != nil {
		return r, err
	}
	line, err := r.servers.line(ctx, 30*time.Second)
	if err != nil {
		return r, err
	}
	addrs := strings.Fields(line)
	if len(addrs) != o.servers+1 {
		return r, fmt.Errorf("servers process printed %q, want %d addresses", line, o.servers+1)
	}
	sinks, echo := addrs[:o.servers], addrs[o.servers]
	for i, a := range sinks {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			return r, fmt.Errorf("server address %q: %w", a, err)
		}
		r.addrs[fmt.Sprintf("s%d", i+1)] = ap
	}
	var front, probeFront int
	for _, port := range []*int{&front, &probeFront} {
		if *port, err = freeport.Get(); err != nil {
			return r, err
		}
	}
	cfg := haproxyConfig(r.socket, o.nbthread, n, front, probeFront, sinks, echo)
	if r.hp, err = startHAProxy(ctx, o.haproxy, dir, r.socket, cfg); err != nil {
		return r, err
	}
	slog.Info("opening connections through HAProxy", "conns", n)
	r.clients, err = startChild("clients", "-front", fmt.Sprintf("127.0.0.1:%d", front), "-probe", fmt.Sprintf("127.0.0.1:%d", probeFront),
		"-n", strconv.Itoa(n), "-send-every", o.sendEvery.String(), "-probe-every", o.probeEvery.String())
	if err != nil {
		return r, err
	}
	if line, err := r.clients.line(ctx, 5*time.Minute); err != nil {
		return r, err
	} else if line != "ready" {
		return r, fmt.Errorf("clients process printed %q, want ready", line)
	}
	if err := waitConnected(ctx, r.socket, n); err != nil {
		return r, err
	}
	slog.Info("connected; settling", "conns", n, "settle", o.settle)
	return r, sleepUntil(ctx, time.Now().Add(o.settle))
}

// stop ends the clients, HAProxy and the servers, in that order, and removes the directory.
func (r *rig) stop() {
	if r.clients != nil {
		r.clients.stop()
	}
	if r.hp != nil {
		r.hp.stop()
	}
	if r.servers != nil {
		r.servers.stop()
	}
	_ = os.RemoveAll(r.dir)
}

// primeReaders builds each method's reader and makes its first read, outside the windows:
// a reader's first read is a base (the kernel reader also lists HAProxy's descriptors then),
// not the steady state measured. It files how many connections that read saw.
func (r *rig) primeReaders(ctx context.Context, methods []string, res *sizeResult) ([]reader, error) {
	readers := make([]reader, len(methods))
	res.methods = make([]methodResult, len(methods))
	for i, m := range methods {
		var err error
		if readers[i], err = newReader(m, r.addrs, r.socket, r.hp.pid()); err != nil {
			return nil, err
		}
		res.methods[i] = methodResult{method: m, seen: -1}
		if readers[i].read == nil {
			continue
		}
		seen, err := readers[i].read(ctx)
		if err != nil {
			return nil, fmt.Errorf("first %s read: %w", m, err)
		}
		res.methods[i].seen = seen
		if seen != res.conns {
			slog.Warn("a first read did not see every connection", "method", m, "seen", seen, "conns", res.conns)
		}
	}
	return readers, nil
}

// window runs one method's window, its probe round trips filed under its name.
func (r *rig) window(ctx context.Context, rd reader, length, interval time.Duration) (window, error) {
	if err := r.clients.send("begin " + rd.name); err != nil {
		return window{}, err
	}
	w, err := runWindow(ctx, rd, r.hp, r.clients, length, interval)
	if err != nil {
		return w, err
	}
	if err := r.clients.send("end"); err != nil {
		return w, err
	}
	if err := r.hp.alive(); err != nil {
		return w, err
	}
	if w.firstErr != nil {
		slog.Warn("reads failed", "method", rd.name, "failed", w.errs, "of", w.made, "first", w.firstErr)
	}
	return w, nil
}

// waitConnected waits until HAProxy has n sessions on backend be's servers (show stat scur).
func waitConnected(ctx context.Context, socket string, n int) error {
	c, err := haproxy.New(haproxy.Config{Socket: socket})
	if err != nil {
		return err
	}
	limit := time.Now().Add(2 * time.Minute)
	for {
		stats, err := c.Stats(ctx, "be")
		if err != nil {
			return fmt.Errorf("count connections: %w", err)
		}
		cur := 0
		for _, s := range stats {
			cur += int(s.CurrentSessions)
		}
		if cur == n {
			return nil
		}
		if time.Now().After(limit) {
			return fmt.Errorf("HAProxy has %d sessions on the backend's servers, want %d", cur, n)
		}
		if err := sleepUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
			return err
		}
	}
}

// runWindow reads with rd every interval for length (none: waits) and measures HAProxy's
// CPU, this process's CPU and each read's time and allocations.
func runWindow(ctx context.Context, rd reader, hp *haproxyProc, cl *child, length, interval time.Duration) (window, error) {
	w := window{expected: int(length / interval)}
	cpu0, err := hp.cpu()
	if err != nil {
		return w, err
	}
	self0 := selfCPU()
	start := time.Now()
	for i := range w.expected {
		slot := start.Add(time.Duration(i) * interval)
		if time.Since(slot) > interval {
			continue // an earlier read ran over this one's turn: it is late, not made
		}
		if err := sleepUntil(ctx, slot); err != nil {
			return w, err
		}
		if rd.read != nil {
			if err := w.measureRead(ctx, rd, hp, cl, interval); err != nil {
				return w, err
			}
		}
	}
	if err := sleepUntil(ctx, start.Add(length)); err != nil {
		return w, err
	}
	// Collect this window's garbage now, on its account, not during the next method's.
	runtime.GC()
	w.wall = time.Since(start)
	w.selfCPU = selfCPU() - self0
	cpu1, err := hp.cpu()
	if err != nil {
		return w, err
	}
	w.haproxyCPU = cpu1 - cpu0
	w.load = loadAverage()
	// Hand the freed heap back now, outside any window: the runtime's background scavenger
	// would otherwise do it during the next method's window, on its account.
	debug.FreeOSMemory()
	return w, nil
}

// measureRead makes one read and files its time, allocations, outcome and what HAProxy spent
// meanwhile: HAProxy answers `show sess all` and `show stat` while they are read, and is not
// asked for the kernel's table, so its CPU during the read, less what it spends without a
// reader in as long, is the read's cost to it, measured in milliseconds instead of over the
// seconds of a window where its other work's ups and downs weigh more.
func (w *window) measureRead(ctx context.Context, rd reader, hp *haproxyProc, cl *child, interval time.Duration) error {
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	if err := cl.send("read 1"); err != nil {
		return err
	}
	hp0, err := hp.cpu()
	if err != nil {
		return err
	}
	spanBegan := time.Now()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	// The read's goroutine keeps its thread, so that thread's CPU is the read's own (the
	// kernel's work in its system calls included; garbage collection on other threads not).
	runtime.LockOSThread()
	cpu0 := threadCPU()
	began := time.Now()
	_, readErr := rd.read(rctx)
	took := time.Since(began)
	w.readCPU += threadCPU() - cpu0
	runtime.UnlockOSThread()
	runtime.ReadMemStats(&m1)
	hp1, err := hp.cpu()
	if err != nil {
		return err
	}
	w.duringSpan += time.Since(spanBegan)
	w.duringCPU += hp1 - hp0
	if err := cl.send("read 0"); err != nil {
		return err
	}
	w.made++
	w.took = append(w.took, took)
	w.allocs += m1.Mallocs - m0.Mallocs
	w.bytes += m1.TotalAlloc - m0.TotalAlloc
	switch {
	case readErr != nil:
		w.errs++
		if w.firstErr == nil {
			w.firstErr = readErr
		}
	case took <= interval:
		w.onTime++
	}
	return nil
}

// collectProbe asks the clients process for the probe's round trips by method.
func collectProbe(ctx context.Context, cl *child, res *sizeResult) error {
	if err := cl.send("report"); err != nil {
		return err
	}
	for {
		line, err := cl.line(ctx, 30*time.Second)
		if err != nil {
			return err
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && f[0] == "done":
			return nil
		case len(f) == 2 && f[0] == "writeerrors":
			res.writeErrors, _ = strconv.Atoi(f[1])
		case len(f) == 9 && f[0] == "probe":
			var p probeStats
			p.n, _ = strconv.Atoi(f[2])
			p.nDuring, _ = strconv.Atoi(f[6])
			for i, d := range []*time.Duration{&p.p50, &p.p99, &p.max, nil, &p.p50During, &p.p99During} {
				if d != nil {
					us, _ := strconv.ParseInt(f[3+i], 10, 64)
					*d = time.Duration(us) * time.Microsecond
				}
			}
			for i := range res.methods {
				if res.methods[i].method == f[1] {
					res.methods[i].probe = p
				}
			}
		default:
			return fmt.Errorf("clients process: unexpected %q", line)
		}
	}
}

// selfCPU is this process's user and system CPU so far: every thread's, so the garbage
// collection a read's allocations cause later counts too (this process does nothing else
// while it measures).
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCPU is the calling thread's user and system CPU so far.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is the 1-minute load average (0 when unreadable).
func loadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

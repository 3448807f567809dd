package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// environment is what the figures were measured on.
type environment struct {
	at              time.Time
	haproxy, kernel string
	cpu             string
	cores           int
	load            float64
	took            time.Duration
}

func describeEnvironment(o options) (environment, error) {
	env := environment{at: time.Now(), cores: runtime.NumCPU(), load: loadAverage()}
	out, err := exec.Command(o.haproxy, "-v").Output()
	if err != nil {
		return env, fmt.Errorf("%s -v: %w", o.haproxy, err)
	}
	env.haproxy, _, _ = strings.Cut(string(out), "\n")
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		env.kernel = strings.TrimSpace(string(raw))
	}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.Lines(string(raw)) {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				env.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return env, nil
}

// writeReport prints the report to stdout and, with -out, to that file.
func writeReport(o options, env environment, results []sizeResult) error {
	var b strings.Builder
	report(&b, o, env, results)
	fmt.Print(b.String())
	if o.out == "" {
		return nil
	}
	if err := os.WriteFile(o.out, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	return nil
}

func report(w io.Writer, o options, env environment, results []sizeResult) {
	fmt.Fprintf(w, "Fast signal read cost, %s: %s (nbthread %d, backend of %d servers), Linux %s, %d × %s, %s; load average %.1f at the start; took %s.\n",
		env.at.Format("2006-01-02 15:04"), env.haproxy, o.nbthread, o.servers, env.kernel, env.cores, env.cpu,
		runtime.Version(), env.load, env.took.Round(time.Second))
	fmt.Fprintf(w, "Each method read every %s for %s per size, in %d rounds alternating the methods; each connection sends 64 bytes every %s; probe round trip every %s.\n\n",
		o.interval, o.duration, o.rounds, o.sendEvery, o.probeEvery)
	fmt.Fprintln(w, "| connections | method | load (1 min) | HAProxy CPU, % of a core | HAProxy CPU ms/read over none (range of rounds) | probe p50 / p99 / max ms | p99 / none | probe during reads: p50 / p99 ms (round trips) | reader CPU ms/read: read / process | read ms median / max | allocs/read | KB/read | reads on time |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range results {
		base := s.method("none")
		for _, m := range s.methods {
			fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				connsLabel(s), m.method, m.load(), m.haproxyShare(), m.overNone(base), m.probe.String(),
				m.p99Ratio(base), m.probe.during(), m.readerCPU(base), m.readTimes(), m.perRead(func(w window) uint64 { return w.allocs }, 1),
				m.perRead(func(w window) uint64 { return w.bytes }, 1024), m.freshness())
		}
	}
	fmt.Fprintln(w)
	for _, s := range results {
		var seen []string
		for _, m := range s.methods {
			if m.seen >= 0 {
				seen = append(seen, m.method+" "+thousands(m.seen))
			}
		}
		fmt.Fprintf(w, "- %s connections: first read saw %s; %d failed client writes.\n", connsLabel(s), strings.Join(seen, ", "), s.writeErrors)
	}
	extrapolate(w, results)
	fmt.Fprintln(w)
}

func connsLabel(s sizeResult) string {
	if s.asked != s.conns {
		return fmt.Sprintf("%s (asked %s)", thousands(s.conns), thousands(s.asked))
	}
	return thousands(s.conns)
}

// thousands writes n with comma separators, as the docs do.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (s sizeResult) method(name string) *methodResult {
	for i := range s.methods {
		if s.methods[i].method == name {
			return &s.methods[i]
		}
	}
	return nil
}

func (m methodResult) sum(f func(window) time.Duration) time.Duration {
	var t time.Duration
	for _, w := range m.windows {
		t += f(w)
	}
	return t
}

func (m methodResult) made() int {
	n := 0
	for _, w := range m.windows {
		n += w.made
	}
	return n
}

func (m methodResult) load() float64 {
	var sum float64
	for _, w := range m.windows {
		sum += w.load
	}
	return sum / float64(max(len(m.windows), 1))
}

// haproxyShare is HAProxy's CPU over the method's windows, in % of one core.
func (m methodResult) haproxyShare() float64 {
	wall := m.sum(func(w window) time.Duration { return w.wall })
	return 100 * float64(m.sum(func(w window) time.Duration { return w.haproxyCPU })) / float64(max(wall, 1))
}

// overNone is HAProxy's CPU during the reads beyond what it spends without a reader in as
// long, per read in ms: over every round, and the range of the rounds (each against its own
// round's baseline), whose spread says how much is noise.
func (m methodResult) overNone(base *methodResult) string {
	if m.method == "none" || base == nil || m.made() == 0 {
		return "—"
	}
	var per []float64
	for i, w := range m.windows {
		if i < len(base.windows) && w.made > 0 {
			one := methodResult{windows: []window{w}}
			per = append(per, one.duringOver(&methodResult{windows: base.windows[i : i+1]}))
		}
	}
	slices.Sort(per)
	return fmt.Sprintf("%.2f (%.2f to %.2f)", m.duringOver(base), per[0], per[len(per)-1])
}

// duringOver is HAProxy's CPU per read during m's reads less base's rate over as long, in ms.
func (m methodResult) duringOver(base *methodResult) float64 {
	rate := float64(base.sum(func(w window) time.Duration { return w.haproxyCPU })) /
		float64(max(base.sum(func(w window) time.Duration { return w.wall }), 1))
	extra := float64(m.sum(func(w window) time.Duration { return w.duringCPU })) -
		rate*float64(m.sum(func(w window) time.Duration { return w.duringSpan }))
	return extra / float64(m.made()) / float64(time.Millisecond)
}

func (p probeStats) String() string {
	if p.n == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s / %s", ms(p.p50), ms(p.p99), ms(p.max))
}

func (p probeStats) during() string {
	if p.nDuring == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s (%d)", ms(p.p50During), ms(p.p99During), p.nDuring)
}

func (m methodResult) p99Ratio(base *methodResult) string {
	if base == nil || base.probe.p99 == 0 || m.probe.n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fx", float64(m.probe.p99)/float64(base.probe.p99))
}

// readerCPU is the reading thread's CPU per read, and this process's CPU over the windows
// beyond the no-reader baseline's per read (the garbage collection the reads cause included).
func (m methodResult) readerCPU(base *methodResult) string {
	if m.made() == 0 {
		return "—"
	}
	made := time.Duration(m.made())
	read := ms(m.sum(func(w window) time.Duration { return w.readCPU }) / made)
	return read + " / " + ms(time.Duration(m.overBase(base, func(w window) time.Duration { return w.selfCPU }))/made)
}

// overBase is f summed over m's windows less the baseline's rate of f over the same time.
func (m methodResult) overBase(base *methodResult, f func(window) time.Duration) float64 {
	total := float64(m.sum(f))
	if base == nil {
		return total
	}
	rate := float64(base.sum(f)) / float64(max(base.sum(func(w window) time.Duration { return w.wall }), 1))
	return total - rate*float64(m.sum(func(w window) time.Duration { return w.wall }))
}

func (m methodResult) readTimes() string {
	var took []time.Duration
	for _, w := range m.windows {
		took = append(took, w.took...)
	}
	if len(took) == 0 {
		return "—"
	}
	slices.Sort(took)
	return fmt.Sprintf("%s / %s", ms(quantile(took, 0.5)), ms(took[len(took)-1]))
}

func (m methodResult) perRead(f func(window) uint64, unit float64) string {
	if m.made() == 0 {
		return "—"
	}
	var sum uint64
	for _, w := range m.windows {
		sum += f(w)
	}
	return fmt.Sprintf("%.0f", float64(sum)/unit/float64(m.made()))
}

// freshness is how many reads finished without error within the interval, of those due.
func (m methodResult) freshness() string {
	if m.method == "none" {
		return "—"
	}
	on, due := 0, 0
	for _, w := range m.windows {
		on += w.onTime
		due += w.expected
	}
	return fmt.Sprintf("%d/%d", on, due)
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond))
}

// extrapolateTo is the size the issue asks the reads' cost at.
const extrapolateTo = 100_000

// extrapolate prints, for the kernel path and `show sess all`, a straight line through the
// sizes measured taken to extrapolateTo connections.
func extrapolate(w io.Writer, results []sizeResult) {
	type point struct{ x, readerCPU, wall, bytes, allocs, haproxyCPU float64 }
	for _, name := range []string{"kernel", "sess"} {
		var pts []point
		for _, s := range results {
			m := s.method(name)
			if m == nil || m.made() == 0 {
				continue
			}
			made := float64(m.made())
			p := point{x: float64(s.conns)}
			base := s.method("none")
			p.readerCPU = float64(m.sum(func(w window) time.Duration { return w.readCPU })) / made / 1e6
			var took []time.Duration
			var bytes, allocs uint64
			for _, win := range m.windows {
				took = append(took, win.took...)
				bytes += win.bytes
				allocs += win.allocs
			}
			slices.Sort(took)
			p.wall = float64(quantile(took, 0.5)) / 1e6
			p.bytes, p.allocs = float64(bytes)/made, float64(allocs)/made
			if base != nil {
				p.haproxyCPU = m.duringOver(base)
			}
			pts = append(pts, p)
		}
		if len(pts) < 2 {
			// Through one size the line would have to pass through zero, and a read's fixed
			// cost would be multiplied with its per-connection one.
			fmt.Fprintf(w, "- %s at %s connections: needs at least two sizes measured.\n", name, thousands(extrapolateTo))
			continue
		}
		at := func(f func(point) float64) float64 {
			xs, ys := make([]float64, len(pts)), make([]float64, len(pts))
			for i, p := range pts {
				xs[i], ys[i] = p.x, f(p)
			}
			return linearAt(xs, ys, extrapolateTo)
		}
		fmt.Fprintf(w, "- %s at %s connections (a straight line through the %d sizes measured): reader %.0f ms CPU, %.0f ms wall, %.1f MB and %.0f allocations per read; HAProxy %.1f ms CPU per read over none.\n",
			name, thousands(extrapolateTo), len(pts), at(func(p point) float64 { return p.readerCPU }), at(func(p point) float64 { return p.wall }),
			at(func(p point) float64 { return p.bytes })/1e6, at(func(p point) float64 { return p.allocs }),
			at(func(p point) float64 { return p.haproxyCPU }))
	}
}

// linearAt is the least-squares line through (xs, ys), at least two points, at x.
func linearAt(xs, ys []float64, x float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 { // every point at one size
		return sy / sx * x
	}
	slope := (n*sxy - sx*sy) / den
	return (sy-slope*sx)/n + slope*x
}

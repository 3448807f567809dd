package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// display prints the live view: on a terminal a table redrawn in place every second,
// otherwise (piped, captured in OUTPUT.md) one compact line per second.
type display struct {
	w       io.Writer
	tty     bool
	names   []string
	phases  [2]time.Duration
	titles  [2]string
	drawn   int // lines of the last table, to redraw over it
	lastHdr int // phase whose header was printed last
}

func (d *display) show(s []sample) {
	i := len(s) - 1
	if d.tty {
		d.table(s, i)
		return
	}
	d.line(s, i)
}

// line prints "  12s off  max/mean 1.52 | s1 10.2k 25c w100 | ...".
func (d *display) line(s []sample, i int) {
	cur := s[i]
	if d.lastHdr != cur.Phase {
		d.lastHdr = cur.Phase
		fmt.Fprintf(d.w, "\n== phase %d/2: %s\n", cur.Phase, d.titles[cur.Phase-1])
		fmt.Fprintf(d.w, "   time  max/mean control   weighted HAProxy per server: load (B/s, 10 s avg), connections, weight\n")
	}
	elapsed, total := d.progress(cur)
	var b strings.Builder
	fmt.Fprintf(&b, "%7s  %8s %7s ", fmtSecs(elapsed)+"/"+fmtSecs(total), fmtRatio(imbalance(s, i)), fmtRatio(imbalanceOf(s, i, controlOf)))
	for k, v := range smoothed(s, i) {
		fmt.Fprintf(&b, "  %s %6s %2dc w%-3d", d.names[k], fmtBytes(v), cur.Conns[k], cur.Weights[k])
	}
	fmt.Fprintln(d.w, b.String())
}

// table redraws a multi-line table with a progress bar.
func (d *display) table(s []sample, i int) {
	cur := s[i]
	if d.lastHdr != cur.Phase {
		d.lastHdr = cur.Phase
		d.drawn = 0 // keep the last table of the previous phase on screen
		fmt.Fprintln(d.w)
	}
	var b strings.Builder
	elapsed, total := d.progress(cur)
	fmt.Fprintf(&b, "phase %d/2: %s\n", cur.Phase, d.titles[cur.Phase-1])
	fmt.Fprintf(&b, "%s %s / %s\n\n", bar(elapsed, total, 40), fmtSecs(elapsed), fmtSecs(total))
	fmt.Fprintf(&b, "%-7s %10s  %-24s %6s %7s\n", "server", "load B/s", "", "conns", "weight")
	loads := smoothed(s, i)
	top := 0.0
	for _, v := range loads {
		top = max(top, v)
	}
	for k, v := range loads {
		fmt.Fprintf(&b, "%-7s %10s  %-24s %6d %7d\n", d.names[k], fmtBytes(v), bar(time.Duration(v), time.Duration(top), 24), cur.Conns[k], cur.Weights[k])
	}
	fmt.Fprintf(&b, "\nmax/mean load: %s (1.00 = perfectly even)\n", fmtRatio(imbalance(s, i)))
	fmt.Fprintf(&b, "control HAProxy (same traffic, never weighted): max/mean %s\n", fmtRatio(imbalanceOf(s, i, controlOf)))
	if d.drawn > 0 {
		fmt.Fprintf(d.w, "\033[%dA\033[J", d.drawn) // cursor up, clear to the end
	}
	d.drawn = strings.Count(b.String(), "\n")
	fmt.Fprint(d.w, b.String())
}

// progress is the time spent in the sample's phase and the phase's length.
func (d *display) progress(cur sample) (elapsed, total time.Duration) {
	start := time.Duration(0)
	if cur.Phase == 2 {
		start = d.phases[0]
	}
	return cur.T - start, d.phases[cur.Phase-1]
}

func bar(v, total time.Duration, width int) string {
	n := 0
	if total > 0 {
		n = int(math.Round(float64(width) * float64(min(v, total)) / float64(total)))
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func fmtSecs(d time.Duration) string {
	return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtBytes(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

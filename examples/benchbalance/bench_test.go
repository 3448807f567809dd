package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/sim"
)

// The harness runs what the README's Quick start says: the flags it reads from there
// must be a Prometheus source this harness serves.
func TestQuickStartFromREADME(t *testing.T) {
	qs, err := readQuickStart("../../README.md", "run")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkQuickStart(qs); err != nil {
		t.Fatal(err)
	}
	if qs.Args[0] != "run" || slices.Contains(qs.Args, "--config") {
		t.Errorf("args = %q, want run with the quick start's flags", qs.Args)
	}
	args := weighterArgs(qs.Args, "/x/weighted.sock", "http://127.0.0.1:1", "127.0.0.1:2")
	for f, want := range map[string]string{"--socket": "/x/weighted.sock", "--prometheus-url": "http://127.0.0.1:1", "--listen": "127.0.0.1:2"} {
		if v, _ := flagValue(args, f); v != want {
			t.Errorf("%s = %q, want %q (args %q)", f, v, want, args)
		}
	}
	for _, f := range []string{"--backend", "--query", "--server-label"} {
		a, _ := flagValue(qs.Args, f)
		b, _ := flagValue(args, f)
		if a != b {
			t.Errorf("%s changed from %q to %q", f, a, b)
		}
	}
}

func TestParseQuickStart(t *testing.T) {
	readme := "# x\n\n## Quick start\n\nText.\n\n```console\n$ haproxy-weighter once --socket /s --backend be \\\n" +
		"    --query 'rate(x[1m])' --apply --output json --server-label \"server\"\n```\n\n" +
		"```sh\nhaproxy-weighter run --backend other --interval 5s\n```\n\n## Next\n\n```\nhaproxy-weighter once --backend wrong\n```\n"
	qs, err := parseQuickStart(readme, "once")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"run", "--socket", "/s", "--backend", "be", "--query", "rate(x[1m])", "--server-label", "server"}
	if !slices.Equal(qs.Args, want) {
		t.Errorf("once: %q, want %q", qs.Args, want)
	}
	qs, err = parseQuickStart(readme, "run")
	if err != nil || !slices.Equal(qs.Args, []string{"run", "--backend", "other", "--interval", "5s"}) {
		t.Errorf("run: %q, %v", qs.Args, err)
	}
	if _, err := parseQuickStart("## Quick start\n\nnone\n", "once"); err == nil {
		t.Error("no command: no error")
	}
}

func TestShellWords(t *testing.T) {
	got, err := shellWords(`a 'b c' "d \"e\"" f\ g`)
	if want := []string{"a", "b c", `d "e"`, "f g"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("shellWords = %q, %v; want %q", got, err, want)
	}
	if _, err := shellWords("a 'b"); err == nil {
		t.Error("unterminated quote: no error")
	}
}

func TestWindowRatiosAndGap(t *testing.T) {
	// Control: server 1 gets 3 of 4 datapoints (max/mean 1.5); weighted 1.2; oracle even.
	var snaps []snapshot
	for s := range 41 {
		sn := snapshot{T: time.Duration(s) * time.Second}
		n := int64(s)
		sn.Lines[armControl] = []int64{3 * n, n}
		sn.Lines[armWeighted] = []int64{12 * n, 8 * n}
		sn.Lines[armOracle] = []int64{n, n}
		snaps = append(snaps, sn)
	}
	r := windowRatios(snaps, armControl, 10*time.Second, 40*time.Second, 10*time.Second)
	if len(r) != 3 || math.Abs(r[0]-1.5) > 1e-9 {
		t.Errorf("control windows = %v, want three of 1.5", r)
	}
	f := figuresOf("1", snaps, 10*time.Second, 40*time.Second, 10*time.Second)
	if g := gapClosed(f.P50[armControl], f.P50[armOracle], f.P50[armWeighted]); math.Abs(g-0.6) > 1e-9 {
		t.Errorf("gap closed = %v, want 0.6", g)
	}
	if g := gapClosed(1.2, 1.2, 1.1); !math.IsNaN(g) {
		t.Errorf("no gap: %v, want NaN", g)
	}
	if q := sim.Quantile([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.9); q != 10 {
		t.Errorf("p90 = %v, want 10", q)
	}
}

func TestOraclePlacesOnLeastLoad(t *testing.T) {
	o := newOracle([]string{"a", "b", "c"})
	a, relA := o.place(100)
	b, _ := o.place(10)
	c, _ := o.place(1)
	d, _ := o.place(5) // c (1) is the lightest
	if a != "a" || b != "b" || c != "c" || d != "c" {
		t.Errorf("placed %s %s %s %s, want a b c c", a, b, c, d)
	}
	relA()
	relA() // once only
	if e, _ := o.place(50); e != "a" || o.load[0] != 50 {
		t.Errorf("after a's connection ended: placed %s, load %v", e, o.load)
	}
}

// TestSmokeRun runs the whole harness for one short seed: real HAProxies, Prometheus and
// the daemon built from this tree. It checks that it runs, prints the figures and leaves
// no process behind, nothing about how even the loads are.
func TestSmokeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real HAProxy and Prometheus for ~20 s")
	}
	tmp := t.TempDir()
	bin := os.Getenv("BENCH_BALANCE_WEIGHTER") // a binary built already, instead of this tree's
	if bin == "" {
		bin = filepath.Join(tmp, "haproxy-weighter")
		build := exec.Command("go", "build", "-o", bin, "./cmd/haproxy-weighter")
		build.Dir = "../.."
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
	}
	dir, out := filepath.Join(tmp, "work"), filepath.Join(tmp, "bench.txt")
	o, err := parseFlags([]string{"-weighter", bin, "-readme", "../../README.md", "-dir", dir, "-out", out,
		"-seeds", "1", "-duration", "16s", "-warmup", "5s", "-conns", "60"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	if err := run(ctx, o, &stdout); err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"control p50 / p90", "gap closed p50 / p90", "\n1      ", "run --socket", "--query 'rate(datapoints_received_total"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("result lacks %q:\n%s", want, text)
		}
	}
	if left, err := exec.Command("pgrep", "-a", "-f", dir).Output(); err == nil {
		t.Errorf("processes left behind:\n%s", left)
	}
}

package examples

import (
	"bufio"
	"context"
	"errors"
	"image"
	_ "image/png" // decode the demo's picture
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

var (
	demoOnce sync.Once
	demoBin  string
	demoErr  error
)

// demoBinary builds examples/demo once per test run.
func demoBinary(t *testing.T) string {
	t.Helper()
	demoOnce.Do(func() {
		demoBin = filepath.Join(tmpRoot, "haproxy-weighter-demo")
		demoErr = goBuild(demoBin, "./examples/demo")
	})
	if demoErr != nil {
		t.Fatal(demoErr)
	}
	return demoBin
}

// demoCmd prepares a short demo run in its own work dir (which every process it starts
// has on its command line).
func demoCmd(ctx context.Context, t *testing.T, runDir string, args ...string) *exec.Cmd {
	t.Helper()
	requireTool(t, "haproxy", "apt-get install haproxy")
	base := []string{"-weighter", weighterBinary(t), "-dir", runDir, "-conns", "60", "-interval", "2s"}
	return exec.CommandContext(ctx, demoBinary(t), append(base, args...)...)
}

func assertNothingLeft(t *testing.T, runDir string) {
	t.Helper()
	if left := processesMentioning(runDir); len(left) > 0 {
		t.Errorf("the demo left processes behind:\n%s", strings.Join(left, "\n"))
	}
}

// TestDemoShortRun runs both phases briefly: the weighter must change HAProxy's weights
// in phase 2, the summary and the picture must come out, and no process may remain.
func TestDemoShortRun(t *testing.T) {
	t.Parallel()
	runDir, png := filepath.Join(t.TempDir(), "run"), filepath.Join(t.TempDir(), "demo.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := demoCmd(ctx, t, runDir, "-phase1", "6s", "-phase2", "14s", "-out", png).CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	text := string(out)
	for _, s := range []string{"== phase 1/2", "== phase 2/2", "phase 1, no weighting:", "phase 2, weighting on:", "control HAProxy", "picture: " + png} {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q:\n%s", s, text)
		}
	}
	// Phase 1 runs with the configured weights (100); in phase 2 the weighter writes others.
	_, phase2, _ := strings.Cut(text, "== phase 2/2")
	p1, _, _ := strings.Cut(text, "== phase 2/2")
	weight := regexp.MustCompile(`\bw(\d+)\b`)
	if ws := weight.FindAllStringSubmatch(p1, -1); len(ws) == 0 || !allEqual(ws, "100") {
		t.Errorf("phase 1 weights should all be 100:\n%s", p1)
	}
	if ws := weight.FindAllStringSubmatch(phase2, -1); len(ws) == 0 || allEqual(ws, "100") {
		t.Errorf("haproxy-weighter changed no weight in phase 2:\n%s", phase2)
	}
	f, err := os.Open(png)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if cfg, format, err := image.DecodeConfig(f); err != nil || format != "png" || cfg.Width < 600 {
		t.Errorf("picture: %v %s %v", cfg, format, err)
	}
	assertNothingLeft(t, runDir)
}

func allEqual(matches [][]string, v string) bool {
	for _, m := range matches {
		if m[1] != v {
			return false
		}
	}
	return true
}

// TestDemoInterrupt presses Ctrl-C once the weighter runs: the demo must stop HAProxy,
// the weighter and its goroutines, and exit 130.
func TestDemoInterrupt(t *testing.T) {
	t.Parallel()
	runDir := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := demoCmd(ctx, t, runDir, "-phase1", "2s", "-phase2", "5m", "-out", "")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testenv.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	started := false
	for !started && sc.Scan() {
		started = strings.HasPrefix(sc.Text(), "started: ")
	}
	if !started {
		_ = cmd.Wait()
		t.Fatalf("the weighter never started; stderr:\n%s", stderr.String())
	}
	if left := processesMentioning(runDir); len(left) < 3 {
		t.Errorf("want the demo, HAProxy and the weighter running before Ctrl-C, found %q", left)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() { // drain, so the demo never blocks on a full pipe
		for sc.Scan() {
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("demo after Ctrl-C: %v, want exit status 130; stderr:\n%s", err, stderr.String())
	}
	assertNothingLeft(t, runDir)
}

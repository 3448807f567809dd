// Package testenv starts the real servers that integration tests talk to, on
// 127.0.0.1, free ports and temporary directories. A missing binary fails the
// test with the command that installs it; nothing is skipped.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MetricsInstallHint is the command that installs every metrics server these helpers start.
const MetricsInstallHint = "apt-get install prometheus graphite-carbon graphite-web python3-gunicorn python3-whisper"

// Prometheus is a real Prometheus serving backfilled data on 127.0.0.1.
type Prometheus struct {
	// URL is the base URL, e.g. http://127.0.0.1:41234; it stays the same across Stop/Start.
	URL  string
	t    testing.TB
	dir  string
	port int
	proc *metricsProc
}

// StartPrometheus backfills openMetrics (OpenMetrics text: timestamps in seconds,
// ending with "# EOF") with promtool into a fresh TSDB and serves it. It is stopped
// when the test ends.
func StartPrometheus(t testing.TB, openMetrics string) *Prometheus {
	t.Helper()
	metricsBinary(t, "prometheus") // fail early, before backfilling
	promtool := metricsBinary(t, "promtool")
	p := &Prometheus{t: t, dir: t.TempDir(), port: FreePort(t)}
	p.URL = "http://127.0.0.1:" + strconv.Itoa(p.port)
	om := filepath.Join(p.dir, "data.om")
	cfg := filepath.Join(p.dir, "prometheus.yml")
	metricsWriteFile(t, om, openMetrics)
	metricsWriteFile(t, cfg, "global:\n  scrape_interval: 1m\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, promtool, "tsdb", "create-blocks-from", "openmetrics", om, p.data()).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool backfill: %v\n%s", err, out)
	}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

func (p *Prometheus) data() string { return filepath.Join(p.dir, "data") }

// Start (re)starts Prometheus on the same port and data, and waits until it is ready.
func (p *Prometheus) Start() {
	p.t.Helper()
	if p.proc != nil {
		p.t.Fatal("testenv: prometheus already running")
	}
	p.proc = startMetricsProc(p.t, p.dir, nil, metricsBinary(p.t, "prometheus"),
		"--config.file="+filepath.Join(p.dir, "prometheus.yml"),
		"--storage.tsdb.path="+p.data(),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(p.port),
		"--storage.tsdb.retention.time=10y")
	metricsPoll(p.t, p.proc, 30*time.Second, "prometheus ready", func() error {
		return metricsGet(p.URL + "/-/ready")
	})
}

// Stop stops Prometheus and waits for it to exit; stopping twice is harmless.
func (p *Prometheus) Stop() {
	if p.proc != nil {
		p.proc.stop(p.t)
		p.proc = nil
	}
}

// metricsProc is a child process (and its children) with its output kept for failures.
type metricsProc struct {
	name string
	cmd  *exec.Cmd
	out  *metricsBuffer
	done chan struct{}
	err  error
}

func startMetricsProc(t testing.TB, dir string, env []string, bin string, args ...string) *metricsProc {
	t.Helper()
	pr := &metricsProc{name: filepath.Base(bin), out: &metricsBuffer{}, done: make(chan struct{})}
	pr.cmd = exec.Command(bin, args...)
	pr.cmd.Dir = dir
	pr.cmd.Env = append(os.Environ(), env...)
	pr.cmd.Stdout, pr.cmd.Stderr = pr.out, pr.out
	// Own process group, so gunicorn's workers stop with it; die with the test binary.
	pr.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := pr.cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", bin, err)
	}
	go func() { pr.err = pr.cmd.Wait(); close(pr.done) }()
	return pr
}

// exited reports, without blocking, whether the process ended.
func (pr *metricsProc) exited() bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

func (pr *metricsProc) stop(t testing.TB) {
	pgid := -pr.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-pr.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-pr.done
		t.Logf("testenv: %s did not stop on SIGTERM; killed", pr.name)
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL) // leftovers of the group, if any
}

// metricsPoll calls check until it succeeds, the process dies, or the deadline passes.
func metricsPoll(t testing.TB, pr *metricsProc, limit time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return
		}
		if pr != nil && pr.exited() {
			t.Fatalf("testenv: %s: %s exited (%v) before ready; output:\n%s", what, pr.name, pr.err, pr.out.tail())
		}
		if time.Now().After(deadline) {
			out := ""
			if pr != nil {
				out = pr.out.tail()
			}
			t.Fatalf("testenv: %s: not ready after %s: %v\n%s", what, limit, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metricsGet succeeds when url answers 200.
func metricsGet(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("http %d", resp.StatusCode)
	}
	return nil
}

// metricsBinary finds an installed binary or fails the test saying how to install it.
func metricsBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		for _, dir := range []string{"/usr/bin", "/usr/sbin"} {
			if _, serr := os.Stat(filepath.Join(dir, name)); serr == nil {
				return filepath.Join(dir, name)
			}
		}
		t.Fatalf("testenv: %s not found (%v); install it: %s", name, err, MetricsInstallHint)
	}
	return path
}

func metricsWriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// metricsBuffer collects process output safely from several goroutines.
type metricsBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *metricsBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail is the last few KB of output, for failure messages.
func (b *metricsBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

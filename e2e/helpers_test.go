package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// haproxyConfig is a leastconn backend of four servers, all at weight 100.
// Nothing listens on the servers' ports: without health checks they stay up,
// and the test only looks at weights.
func haproxyConfig(t *testing.T) string {
	var b strings.Builder
	b.WriteString(testenv.HAProxyDefaults)
	b.WriteString("backend be_ingest\n  balance leastconn\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "  server %s 127.0.0.1:%d weight 100\n", s, testenv.FreePort(t))
	}
	return b.String()
}

var servers = []string{"s1", "s2", "s3", "s4"}

// loads are the servers' rates; want are their weights, computed by hand:
// limited-proportions with L=4, A=1: mean 37.5, floor 37.5/4 = 9.4 clips
// nothing, weights ∝ 1/load with the lightest at 256.
var (
	loads   = map[string]float64{"s1": 10, "s2": 20, "s3": 40, "s4": 80}
	want    = map[string]int{"s1": 256, "s2": 128, "s3": 64, "s4": 32}
	initial = map[string]int{"s1": 100, "s2": 100, "s3": 100, "s4": 100}
)

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, text string) string {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// result is what a finished command printed.
type result struct {
	stdout, stderr string
	code           int
}

// runCmd runs the binary to completion.
func runCmd(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return r
}

// planTable parses the once table: server → NEW column, found by its header
// (the columns before it vary: ADDRESS came in later).
func planTable(t *testing.T, out string) map[string]int {
	t.Helper()
	got := map[string]int{}
	col := -1
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "SERVER" {
			col = slices.Index(f, "NEW")
			continue
		}
		if col > 0 && len(f) > col && strings.HasPrefix(f[0], "s") && len(f[0]) == 2 {
			n, err := strconv.Atoi(f[col])
			if err != nil {
				t.Fatalf("bad NEW column in %q", sc.Text())
			}
			got[f[0]] = n
		}
	}
	return got
}

// daemon is a running `haproxy-weighter run`.
type daemon struct {
	t    *testing.T
	cmd  *exec.Cmd
	logs *testenv.SyncBuffer
	url  string
	// exited is closed once the process has exited and been waited for:
	// cmd.ProcessState may be read after it, not before (Wait writes it).
	exited chan struct{}
}

func startDaemon(t *testing.T, listen string, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, logs: &testenv.SyncBuffer{}, url: "http://" + listen, exited: make(chan struct{})}
	d.cmd = exec.Command(binary, append([]string{"run", "--log-format", "json"}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.logs.String())
		}
	})
	return d
}

// stop sends SIGTERM and returns the exit code.
func (d *daemon) stop() int {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		d.t.Fatal("daemon did not exit within 20s of SIGTERM")
	}
	return d.cmd.ProcessState.ExitCode()
}

func (d *daemon) get(path string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metric returns the value of one exact series from /metrics, or -1 if absent.
func (d *daemon) metric(series string) float64 {
	code, body := d.get("/metrics")
	if code != http.StatusOK {
		return -1
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

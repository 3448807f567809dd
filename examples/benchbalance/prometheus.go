package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
	"github.com/haproxy-weighter/haproxy-weighter/internal/freeport"
)

// metricName is the sinks' counter, the metric of the README's quick-start query.
const metricName = "datapoints_received_total"

// exporter serves the weighted HAProxy's sinks' datapoint counters in Prometheus' text
// format, one series per server: datapoints_received_total{server="s1"}.
type exporter struct {
	srv  *http.Server
	addr string
	done chan struct{}
}

func startExporter(sinks []*loadlab.Sink) (*exporter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("exporter: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		fmt.Fprintf(&b, "# HELP %s Datapoints (lines) received by the server.\n# TYPE %s counter\n", metricName, metricName)
		for _, s := range sinks {
			fmt.Fprintf(&b, "%s{server=%q} %d\n", metricName, s.Name, s.Lines())
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(b.String()))
	})
	e := &exporter{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, addr: ln.Addr().String(), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		_ = e.srv.Serve(ln)
	}()
	return e, nil
}

func (e *exporter) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = e.srv.Shutdown(ctx)
	_ = e.srv.Close()
	<-e.done
}

// findPrometheus resolves Debian's prometheus binary.
func findPrometheus(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/prometheus"); err == nil {
		return "/usr/bin/prometheus", nil
	}
	return "", errors.New("prometheus not found: install it with `apt-get install --no-install-recommends prometheus`")
}

// startPrometheus starts a real Prometheus on a free loopback port with a fresh TSDB in
// dir, scraping target every scrape, and waits until it is ready. Its files in dir start
// with name (one Prometheus per weighted arm, as each arm's servers are another user's).
// The child is returned even with an error, so that it can be stopped.
func startPrometheus(ctx context.Context, bin, dir, name, target string, scrape time.Duration) (*loadlab.Child, string, error) {
	addr, err := freeport.Loopback()
	if err != nil {
		return nil, "", err
	}
	cfg := filepath.Join(dir, name+".yml")
	text := fmt.Sprintf(`# written by bench-balance
global:
  scrape_interval: %s
  scrape_timeout: 5s
  evaluation_interval: %s
scrape_configs:
  - job_name: sinks
    static_configs:
      - targets: ['%s']
`, scrape, scrape, target)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		return nil, "", fmt.Errorf("write prometheus config: %w", err)
	}
	logPath := filepath.Join(dir, name+".log")
	p, err := loadlab.StartChild(name, logPath, bin,
		"--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, name+"-data"),
		"--web.listen-address="+addr,
		"--storage.tsdb.retention.time=1d")
	if err != nil {
		return nil, "", err
	}
	url := "http://" + addr
	if err := p.WaitReady(ctx, 60*time.Second, loadlab.HTTPOK(url+"/-/ready")); err != nil {
		return p, "", fmt.Errorf("%w\n%s", err, tail(logPath))
	}
	return p, url, nil
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Sprintf("--- %s (end) ---\n%s", filepath.Base(path), b)
}

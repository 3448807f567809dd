package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/carbonconf"
	"github.com/haproxy-weighter/haproxy-weighter/internal/freeport"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
)

// python is Debian's interpreter, which has carbon, graphite-web and gunicorn (a pyenv
// python3 earlier in PATH would not: docs/testing.md).
const python = "/usr/bin/python3"

// cache is one carbon-cache instance: its name (carbon-cache --instance) and ports.
type cache struct {
	name                   string
	line, pickle, cacheQry string // 127.0.0.1:port
}

func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// portNum is addr's port as a number (0 when it has none).
func portNum(addr string) int {
	n, _ := strconv.Atoi(port(addr))
	return n
}

// freePorts returns n free loopback addresses.
func freePorts(n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		a, err := freeport.Loopback()
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// writeCacheConf writes dir/conf/carbon.conf for the cache instances (the first in
// [cache], the others in [cache:NAME] with their own ports) and storage-schemas.conf
// with carbon's own metrics at one point per interval (the README's advice: a coarser
// step keeps only each bucket's last count), as docs/testing.md's Graphite does.
func writeCacheConf(dir string, caches []cache, interval time.Duration) error {
	conf := carbonconf.Caches(dir, confCaches(caches), int(interval/time.Second))
	schemas := fmt.Sprintf("[carbon]\npattern = ^carbon\\.\nretentions = %ds:1d\n\n[all]\npattern = .*\nretentions = 60s:1d\n", int(interval/time.Second))
	for _, d := range []string{"conf", "log", "run", "storage/whisper", "storage/lists"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "conf", "carbon.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "conf", "storage-schemas.conf"), []byte(schemas), 0o644)
}

// writeRelayConf writes a carbon-relay's own carbon.conf in dir: a plaintext receiver on
// line, every datapoint to the one destination over the line protocol (the forwarder
// that gives the relay its source address), flow control on (a full queue pauses the
// receiver rather than dropping), no metrics of its own (they would reach the caches).
func writeRelayConf(dir, line, pickle, dest string) error {
	for _, d := range []string{"conf", "log", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf(`[relay]
CONF_DIR = %[1]s/conf/
LOG_DIR = %[1]s/log/
PID_DIR = %[1]s/run/
STORAGE_DIR = %[1]s/
USER =
LINE_RECEIVER_INTERFACE = 127.0.0.1
LINE_RECEIVER_PORT = %[2]s
PICKLE_RECEIVER_INTERFACE = 127.0.0.1
PICKLE_RECEIVER_PORT = %[3]s
ENABLE_UDP_LISTENER = False
RELAY_METHOD = consistent-hashing
DESTINATIONS = %[4]s:a
DESTINATION_PROTOCOL = line
MAX_QUEUE_SIZE = 10000
USE_FLOW_CONTROL = True
CARBON_METRIC_INTERVAL = 0
LOG_LISTENER_CONNECTIONS = False
`, dir, port(line), port(pickle), dest)
	if err := os.WriteFile(filepath.Join(dir, "conf", "carbon.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	// carbon-relay refuses to start without one, though it stores nothing.
	return os.WriteFile(filepath.Join(dir, "conf", "storage-schemas.conf"), []byte("[all]\npattern = .*\nretentions = 60s:1d\n"), 0o644)
}

// confCaches are the caches as carbonconf takes them.
func confCaches(caches []cache) []carbonconf.Cache {
	cs := make([]carbonconf.Cache, len(caches))
	for k, c := range caches {
		cs[k] = carbonconf.Cache{Name: c.name, Line: portNum(c.line), Pickle: portNum(c.pickle), CacheQuery: portNum(c.cacheQry)}
	}
	return cs
}

// settingsModule is the name of graphite-web's settings module in the arm's directory.
const settingsModule = "carbonbench_graphite_settings"

// startGraphiteWeb starts graphite-web under gunicorn on addr and waits until it renders.
func startGraphiteWeb(ctx context.Context, dir, addr string, caches []cache) (*loadlab.Child, error) {
	if err := os.WriteFile(filepath.Join(dir, settingsModule+".py"), []byte(carbonconf.GraphiteSettings(dir, "haproxy-weighter-carbonbench", confCaches(caches), "")), 0o644); err != nil {
		return nil, err
	}
	cmd := fmt.Sprintf("cd %q && PYTHONPATH=%q GRAPHITE_SETTINGS_MODULE=%s DJANGO_SETTINGS_MODULE=graphite.settings exec %s -m gunicorn --bind %s --workers 1 graphite.wsgi:application",
		dir, dir, settingsModule, python, addr)
	web, err := loadlab.StartChild("graphite-web", filepath.Join(dir, "graphite-web.log"), "/bin/sh", "-c", cmd)
	if err != nil {
		return nil, err
	}
	err = web.WaitReady(ctx, 60*time.Second, loadlab.HTTPOK("http://"+addr+"/render?target=none.such&format=json"))
	return web, err
}

// waitListening polls addr until it accepts a connection.
func waitListening(ctx context.Context, c *loadlab.Child, addr string) error {
	return c.WaitReady(ctx, 60*time.Second, func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err
	})
}

// carbonHost is how carbon names this host in carbon.agents.<host>-<instance>
// (its own reading of the host name, dots turned to "_").
func carbonHost(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, python, "-c", "from carbon import instrumentation; print(instrumentation.HOSTNAME)").Output()
	if err != nil {
		return "", fmt.Errorf("carbon's host name (is graphite-carbon installed? apt-get install graphite-carbon graphite-web python3-gunicorn): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// point is one count carbon wrote: the datapoints an instance received in the interval
// that ended at T.
type point struct {
	T     time.Time
	Count float64
}

// renderCounts reads every instance's carbon.agents.<agent>.metricsReceived from
// graphite-web between from and until, keyed by agent (<host>-<instance>).
func renderCounts(ctx context.Context, webURL string, from, until time.Time) (map[string][]point, error) {
	q := url.Values{"target": {"carbon.agents.*.metricsReceived"}, "format": {"json"},
		"from": {strconv.FormatInt(from.Unix(), 10)}, "until": {strconv.FormatInt(until.Unix(), 10)}}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, webURL+"/render?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var reply []struct {
		Target     string        `json:"target"`
		Datapoints [][2]*float64 `json:"datapoints"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return nil, fmt.Errorf("render: http %d: %w", resp.StatusCode, err)
	}
	out := map[string][]point{}
	for _, s := range reply {
		agent := strings.TrimSuffix(strings.TrimPrefix(s.Target, "carbon.agents."), ".metricsReceived")
		for _, dp := range s.Datapoints {
			if dp[0] != nil && dp[1] != nil {
				out[agent] = append(out[agent], point{T: time.Unix(int64(*dp[1]), 0), Count: *dp[0]})
			}
		}
	}
	return out, nil
}

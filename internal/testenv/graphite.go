package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// GraphiteStep is the resolution of every metric the test Graphite stores (10s:1d):
// points in one step overwrite each other; points older than a day are dropped.
const GraphiteStep = 10 * time.Second

// Graphite is a real carbon-cache plus graphite-web (gunicorn) on 127.0.0.1.
type Graphite struct {
	// URL is graphite-web's base URL; render at URL + "/render".
	URL      string
	dir      string
	linePort int
	carbon   *metricsProc
	web      *metricsProc
}

// graphiteSettingsModule is the settings module graphite-web must load; the module
// drops a marker file so we can tell it was not silently replaced by defaults.
const graphiteSettingsModule = "weighter_test_graphite_settings"

// StartGraphite starts carbon-cache and graphite-web and waits until both serve.
// They are stopped when the test ends. Start-up takes about two seconds: share one
// instance between the tests of a package where possible. Graphite's database is
// not migrated (render does not use it; it would cost seconds), so tag queries
// (seriesByTag) fail with HTTP 500.
func StartGraphite(t testing.TB) *Graphite {
	t.Helper()
	graphiteInstalled(t)
	g := &Graphite{dir: t.TempDir(), linePort: FreePort(t)}
	webPort, cachePort, picklePort := FreePort(t), FreePort(t), FreePort(t)
	g.URL = "http://127.0.0.1:" + strconv.Itoa(webPort)
	g.writeCarbonConf(t, cachePort, picklePort)
	metricsWriteFile(t, filepath.Join(g.dir, graphiteSettingsModule+".py"), graphiteSettings(g.dir, cachePort))

	g.carbon = startMetricsProc(t, g.dir, nil, "/usr/bin/carbon-cache",
		"--config="+filepath.Join(g.dir, "conf", "carbon.conf"), "--nodaemon", "start")
	g.web = startMetricsProc(t, g.dir, g.env(), "/usr/bin/python3", "-m", "gunicorn",
		"--bind", "127.0.0.1:"+strconv.Itoa(webPort), "--workers", "1", "graphite.wsgi:application")
	t.Cleanup(func() { g.Stop(t) })

	metricsPoll(t, g.carbon, 30*time.Second, "carbon-cache line port", func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(g.linePort), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	metricsPoll(t, g.web, 30*time.Second, "graphite-web render", func() error {
		return metricsGet(g.URL + "/render?target=none.such&format=json")
	})
	if _, err := os.Stat(filepath.Join(g.dir, "settings-loaded")); err != nil {
		t.Fatalf("testenv: graphite-web did not load %s (Debian's wsgi.py falls back to defaults): %v",
			graphiteSettingsModule, err)
	}
	return g
}

// graphiteInstalled fails the test unless carbon, graphite-web and gunicorn are
// installed for Debian's python (a pyenv python3 earlier in PATH lacks them).
func graphiteInstalled(t testing.TB) {
	t.Helper()
	metricsBinary(t, "carbon-cache")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", "import carbon, graphite, gunicorn, whisper").CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: graphite python modules missing (%v: %s); install them: %s", err, out, MetricsInstallHint)
	}
}

func (g *Graphite) env() []string {
	return []string{
		"PYTHONPATH=" + g.dir,
		"GRAPHITE_SETTINGS_MODULE=" + graphiteSettingsModule,
		"DJANGO_SETTINGS_MODULE=graphite.settings",
	}
}

func (g *Graphite) writeCarbonConf(t testing.TB, cachePort, picklePort int) {
	t.Helper()
	st := filepath.Join(g.dir, "storage")
	conf := fmt.Sprintf(`[cache]
STORAGE_DIR = %[1]s/
LOCAL_DATA_DIR = %[1]s/whisper/
WHITELISTS_DIR = %[1]s/lists/
CONF_DIR = %[2]s/conf/
LOG_DIR = %[2]s/log/
PID_DIR = %[2]s/run/
USER =
MAX_CACHE_SIZE = inf
MAX_UPDATES_PER_SECOND = inf
MAX_CREATES_PER_MINUTE = inf
LINE_RECEIVER_INTERFACE = 127.0.0.1
LINE_RECEIVER_PORT = %[3]d
ENABLE_UDP_LISTENER = False
PICKLE_RECEIVER_INTERFACE = 127.0.0.1
PICKLE_RECEIVER_PORT = %[4]d
CACHE_QUERY_INTERFACE = 127.0.0.1
CACHE_QUERY_PORT = %[5]d
CARBON_METRIC_INTERVAL = 0
LOG_LISTENER_CONNECTIONS = False
LOG_UPDATES = False
LOG_CREATES = False
ENABLE_MANHOLE = False
`, st, g.dir, g.linePort, picklePort, cachePort)
	metricsWriteFile(t, filepath.Join(g.dir, "conf", "carbon.conf"), conf)
	metricsWriteFile(t, filepath.Join(g.dir, "conf", "storage-schemas.conf"),
		"[all]\npattern = .*\nretentions = 10s:1d\n")
	for _, d := range []string{"log", "run", "storage/whisper", "storage/lists"} {
		if err := os.MkdirAll(filepath.Join(g.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func graphiteSettings(dir string, cachePort int) string {
	return fmt.Sprintf(`import os
SECRET_KEY = 'haproxy-weighter-test'
STORAGE_DIR = %[1]q
WHISPER_DIR = os.path.join(STORAGE_DIR, 'whisper')
STANDARD_DIRS = [WHISPER_DIR]
INDEX_FILE = os.path.join(STORAGE_DIR, 'index')
LOG_DIR = %[2]q
DATABASES = {'default': {'ENGINE': 'django.db.backends.sqlite3', 'NAME': %[3]q}}
CARBONLINK_HOSTS = ['127.0.0.1:%[4]d:a']
ALLOWED_HOSTS = ['*']
open(os.path.join(%[5]q, 'settings-loaded'), 'w').close()
`, filepath.Join(dir, "storage"), filepath.Join(dir, "log"), filepath.Join(dir, "graphite.db"), cachePort, dir)
}

// Write sends points to carbon's plaintext port (NaN values are skipped: they are
// nulls) and waits until graphite-web renders every one of them.
func (g *Graphite) Write(t testing.TB, metric string, points ...weighter.Point) {
	t.Helper()
	var lines strings.Builder
	want := map[int64]float64{}
	for _, p := range points {
		if math.IsNaN(p.Value) {
			continue
		}
		fmt.Fprintf(&lines, "%s %v %d\n", metric, p.Value, p.Time.Unix())
		want[p.Time.Unix()/10*10] = p.Value
	}
	if len(want) == 0 {
		return
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(g.linePort), 5*time.Second)
	if err != nil {
		t.Fatalf("testenv: carbon line port: %v", err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, lines.String()); err != nil {
		t.Fatalf("testenv: write to carbon: %v", err)
	}
	c.Close()
	metricsPoll(t, g.web, 30*time.Second, "graphite shows "+metric, func() error {
		return g.visible(metric, points, want)
	})
}

// visible succeeds when a render of metric holds every wanted point.
func (g *Graphite) visible(metric string, points []weighter.Point, want map[int64]float64) error {
	from, until := points[0].Time, points[0].Time
	for _, p := range points {
		if p.Time.Before(from) {
			from = p.Time
		}
		if p.Time.After(until) {
			until = p.Time
		}
	}
	q := url.Values{"target": {metric}, "format": {"json"},
		"from": {strconv.FormatInt(from.Unix()-10, 10)}, "until": {strconv.FormatInt(until.Unix()+10, 10)}}
	got, err := graphiteRender(g.URL + "/render?" + q.Encode())
	if err != nil {
		return err
	}
	for ts, v := range want {
		if gv, ok := got[ts]; !ok || gv != v {
			return fmt.Errorf("point %d: want %v, rendered %v (present %v)", ts, v, gv, ok)
		}
	}
	return nil
}

func graphiteRender(u string) (map[int64]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var reply []struct {
		Datapoints [][2]*float64 `json:"datapoints"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return nil, fmt.Errorf("render: http %d: %w", resp.StatusCode, err)
	}
	got := map[int64]float64{}
	for _, s := range reply {
		for _, dp := range s.Datapoints {
			if dp[0] != nil && dp[1] != nil {
				got[int64(*dp[1])] = *dp[0]
			}
		}
	}
	return got, nil
}

// Stop stops graphite-web and carbon-cache; a render then fails to connect.
func (g *Graphite) Stop(t testing.TB) {
	for _, p := range []**metricsProc{&g.web, &g.carbon} {
		if *p != nil {
			(*p).stop(t)
			*p = nil
		}
	}
}

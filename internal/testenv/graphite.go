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

	"github.com/haproxy-weighter/haproxy-weighter/internal/carbonconf"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// GraphiteStep is the resolution of every metric the test Graphite stores (10s:1d):
// points in one step overwrite each other; points older than a day are dropped.
const GraphiteStep = 10 * time.Second

// Graphite is a real carbon-cache (or several) plus graphite-web (gunicorn) on 127.0.0.1.
type Graphite struct {
	// URL is graphite-web's base URL; render at URL + "/render".
	URL       string
	dir       string
	linePort  int // the first instance's
	instances []carbonInstance
	carbon    []*metricsProc
	web       *metricsProc
}

// GraphiteOptions shape the carbon that StartGraphiteWith starts.
type GraphiteOptions struct {
	// Instances name the carbon-cache instances (carbon-cache --instance=NAME),
	// each with its own ports, all writing to one storage that graphite-web
	// reads (asking each instance's cache for the points not yet written).
	// Default: one, "a".
	Instances []string
	// MetricInterval is carbon's CARBON_METRIC_INTERVAL, in whole seconds:
	// each instance writes its own metrics (carbon.agents.<host>-<instance>.*,
	// counts per interval), stored at this step. 0 (the default) writes none,
	// so they cannot match a test's wildcards.
	MetricInterval time.Duration
}

// carbonInstance is one carbon-cache's name and ports.
type carbonInstance struct {
	name                   string
	line, pickle, cacheQry int
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
	return StartGraphiteWith(t, GraphiteOptions{})
}

// StartGraphiteWith is StartGraphite with carbon shaped by opts: several
// carbon-cache instances, carbon's own metrics.
func StartGraphiteWith(t testing.TB, opts GraphiteOptions) *Graphite {
	t.Helper()
	graphiteInstalled(t)
	if len(opts.Instances) == 0 {
		opts.Instances = []string{"a"}
	}
	if opts.MetricInterval < 0 || opts.MetricInterval%time.Second != 0 {
		t.Fatalf("testenv: carbon's metric interval %v is not whole seconds", opts.MetricInterval)
	}
	g := &Graphite{dir: t.TempDir()}
	for _, name := range opts.Instances {
		g.instances = append(g.instances, carbonInstance{name: name, line: FreePort(t), pickle: FreePort(t), cacheQry: FreePort(t)})
	}
	g.linePort = g.instances[0].line
	webPort := FreePort(t)
	g.URL = "http://127.0.0.1:" + strconv.Itoa(webPort)
	g.writeCarbonConf(t, int(opts.MetricInterval/time.Second))
	metricsWriteFile(t, filepath.Join(g.dir, graphiteSettingsModule+".py"), carbonconf.GraphiteSettings(g.dir, "haproxy-weighter-test", g.caches(),
		fmt.Sprintf("open(os.path.join(%q, 'settings-loaded'), 'w').close()\n", g.dir)))

	for _, in := range g.instances {
		g.carbon = append(g.carbon, startMetricsProc(t, g.dir, nil, "/usr/bin/carbon-cache",
			"--config="+filepath.Join(g.dir, "conf", "carbon.conf"), "--instance="+in.name, "--nodaemon", "start"))
	}
	g.web = startMetricsProc(t, g.dir, g.env(), "/usr/bin/python3", "-m", "gunicorn",
		"--bind", "127.0.0.1:"+strconv.Itoa(webPort), "--workers", "1", "graphite.wsgi:application")
	t.Cleanup(func() { g.Stop(t) })

	for i, in := range g.instances {
		metricsPoll(t, g.carbon[i], 30*time.Second, "carbon-cache "+in.name+" line port", func() error {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(in.line), time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	metricsPoll(t, g.web, 30*time.Second, "graphite-web render", func() error {
		return metricsGet(g.URL + "/render?target=none.such&format=json")
	})
	if _, err := os.Stat(filepath.Join(g.dir, "settings-loaded")); err != nil {
		t.Fatalf("testenv: graphite-web did not load %s (Debian's wsgi.py falls back to defaults): %v",
			graphiteSettingsModule, err)
	}
	return g
}

// LinePort is the plaintext port of the carbon-cache instance named instance.
func (g *Graphite) LinePort(t testing.TB, instance string) int {
	t.Helper()
	for _, in := range g.instances {
		if in.name == instance {
			return in.line
		}
	}
	t.Fatalf("testenv: no carbon-cache instance %q", instance)
	return 0
}

// CarbonAgent is the name carbon-cache gives its own metrics' node
// (carbon.agents.<agent>.metricsReceived): the host name with its dots turned
// to "_", a dash, the instance.
func CarbonAgent(t testing.TB, instance string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// carbon's own reading of the host name, not Go's: they could differ.
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", "from carbon import instrumentation; print(instrumentation.HOSTNAME)").Output()
	if err != nil {
		t.Fatalf("testenv: carbon's host name: %v", err)
	}
	return strings.TrimSpace(string(out)) + "-" + instance
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

func (g *Graphite) writeCarbonConf(t testing.TB, metricInterval int) {
	t.Helper()
	conf := carbonconf.Caches(g.dir, g.caches(), metricInterval)
	metricsWriteFile(t, filepath.Join(g.dir, "conf", "carbon.conf"), conf)
	schemas := "[all]\npattern = .*\nretentions = 10s:1d\n"
	if metricInterval > 0 {
		// One point per interval, none overwritten by the next.
		schemas = fmt.Sprintf("[carbon]\npattern = ^carbon\\.\nretentions = %ds:1d\n\n", metricInterval) + schemas
	}
	metricsWriteFile(t, filepath.Join(g.dir, "conf", "storage-schemas.conf"), schemas)
	for _, d := range []string{"log", "run", "storage/whisper", "storage/lists"} {
		if err := os.MkdirAll(filepath.Join(g.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// caches are the instances as carbonconf takes them.
func (g *Graphite) caches() []carbonconf.Cache {
	caches := make([]carbonconf.Cache, len(g.instances))
	for k, in := range g.instances {
		caches[k] = carbonconf.Cache{Name: in.name, Line: in.line, Pickle: in.pickle, CacheQuery: in.cacheQry}
	}
	return caches
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
	if g.web != nil {
		g.web.stop(t)
		g.web = nil
	}
	for _, p := range g.carbon {
		p.stop(t)
	}
	g.carbon = nil
}

package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func noEnv(string) (string, bool) { return "", false }

func TestBadConfigs(t *testing.T) {
	tests := map[string]string{
		"bad-duplicate.yml":        `testdata/bad-duplicate.yml:4: backends[1] (be_ingest): name: duplicate backend "be_ingest"`,
		"bad-duration.yml":         `testdata/bad-duration.yml:1: interval: invalid duration (want e.g. 10s, 1m30s)`,
		"bad-env.yml":              `testdata/bad-env.yml:5: environment variable HW_TEST_UNSET_KEY is not set`,
		"bad-jitter.yml":           `testdata/bad-jitter.yml:1: jitter: must be in [0, 1), got NaN`,
		"bad-function.yml":         `testdata/bad-function.yml:5: backends[0] (be_ingest): function "proportional" is unknown, valid: feedback, limited-proportions, normalised-exponential`,
		"bad-missing-name.yml":     `testdata/bad-missing-name.yml:2: backends[0]: name: missing`,
		"bad-missing-source.yml":   `testdata/bad-missing-source.yml:2: backends[0] (be_ingest): source: missing (one of prometheus, graphite, haproxy)`,
		"bad-no-backends.yml":      `testdata/bad-no-backends.yml: backends: at least one backend is required`,
		"bad-prometheus-query.yml": `testdata/bad-prometheus-query.yml:4: backends[0] (be_ingest): source: prometheus: query: must be set`,
		"bad-syntax.yml":           `testdata/bad-syntax.yml:1: did not find expected '-' indicator`,
		"bad-two-sources.yml":      `testdata/bad-two-sources.yml:3: backends[0] (be_ingest): source: more than one of prometheus, graphite, haproxy`,
		"bad-type.yml":             "testdata/bad-type.yml:4: deadband: want an integer, got a string",
		"bad-unknown-key.yml":      `testdata/bad-unknown-key.yml:6: unknown key "limiting_factr"`,
		"bad-policy-values.yml": `testdata/bad-policy-values.yml:4: backends[0] (be_ingest): limiting_factor must be > 1, got 1
testdata/bad-policy-values.yml:5: backends[0] (be_ingest): aggregate "mean" is unknown, valid: last, avg, max, median`,
	}
	files, err := filepath.Glob("testdata/bad-*.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(tests) {
		t.Errorf("%d bad-*.yml files but %d cases: every file needs its expected message", len(files), len(tests))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(path, data, noEnv)
			if err == nil {
				t.Fatal("accepted")
			}
			if want := tests[filepath.Base(path)]; err.Error() != want {
				t.Errorf("got\n%s\nwant\n%s", err, want)
			}
		})
	}
}

func TestGoodConfigDefaultsAndEnv(t *testing.T) {
	data, err := os.ReadFile("testdata/good.yml")
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) { return map[string]string{"API_KEY": "s3cr3t"}[k], k == "API_KEY" }
	c, err := Parse("good.yml", data, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval != duration.Duration(5*time.Second) || c.Listen != "" || c.Jitter != DefaultJitter || c.CycleTimeout() != 5*time.Second {
		t.Errorf("top level: interval %s listen %q jitter %g timeout %s", c.Interval, c.Listen, c.Jitter, c.CycleTimeout())
	}
	ingest, udp := c.Backends[0], c.Backends[1]
	want := weighter.DefaultPolicy()
	want.Aggregate, want.LimitingFactor = "avg", 3
	if ingest.Policy != want {
		t.Errorf("be_ingest policy %+v, want defaults with avg and L=3: %+v", ingest.Policy, want)
	}
	if p := ingest.Source.Config().(*sources.PrometheusConfig); p == nil || p.ServerLabel != "server" || p.Timeout != duration.Duration(5*time.Second) {
		t.Errorf("prometheus source defaults lost: %+v", p)
	}
	if udp.Function != "normalised-exponential" || udp.LimitingFactor != 4 || udp.Source.Kind() != "graphite" {
		t.Errorf("be_udp: %+v", udp)
	}
	if g := udp.Source.Config().(*sources.GraphiteConfig); g.URL != "https://graphite.example/s3cr3t" || g.From != "-5min" {
		t.Errorf("graphite: url %q from %q", g.URL, g.From)
	}
}

func TestEnvInCommentIgnored(t *testing.T) {
	data := "# key: ${NOT_SET_ANYWHERE}\nbackends:\n  - name: b\n    source: {haproxy: {counter: bytes_in}}\n"
	if _, err := Parse("c.yml", []byte(data), noEnv); err != nil {
		t.Fatal(err)
	}
}

func TestFromFlagsMatchesFile(t *testing.T) {
	lf := 4.0
	c, err := FromFlags(Flags{Socket: "/tmp/admin.sock", Backend: "be_ingest", Source: map[string]string{"prometheus-url": "http://127.0.0.1:9090",
		"query": "rate(datapoints_received_total[15s])", "server-label": "server"}, Interval: 5 * time.Second, LimitingFactor: &lf})
	if err != nil {
		t.Fatal(err)
	}
	file := `interval: 5s
haproxy: {socket: /tmp/admin.sock}
backends:
  - name: be_ingest
    source:
      prometheus: {url: "http://127.0.0.1:9090", query: "rate(datapoints_received_total[15s])", server_label: server}
    limiting_factor: 4
`
	f, err := Parse("f.yml", []byte(file), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval != f.Interval || c.HAProxy != f.HAProxy || c.Backends[0].Policy != f.Backends[0].Policy ||
		!reflect.DeepEqual(c.Backends[0].Source, f.Backends[0].Source) {
		t.Errorf("flags %+v\nfile  %+v", c, f)
	}
}

// TestFromFlagsFastSignal: --fast-signal off gives the backend fast_signal:
// off, and with it the interval of a backend weighed by its source alone;
// left out, the backend uses the fast signal and its 2 s interval.
func TestFromFlagsFastSignal(t *testing.T) {
	prom := map[string]string{"prometheus-url": "http://127.0.0.1:9090", "query": "rate(x[1m])", "server-label": "server"}
	on, err := FromFlags(Flags{Backend: "b", Source: prom})
	if err != nil {
		t.Fatal(err)
	}
	off, err := FromFlags(Flags{Backend: "b", Source: prom, FastSignal: FastOff})
	if err != nil {
		t.Fatal(err)
	}
	if on.Backends[0].FastSignal != FastOn || !on.Backends[0].UsesFastSignal() || on.Interval != duration.Duration(DefaultFastInterval) {
		t.Errorf("default: fast_signal %q, interval %s", on.Backends[0].FastSignal, on.Interval)
	}
	if off.Backends[0].FastSignal != FastOff || off.Backends[0].UsesFastSignal() || off.Interval != duration.Duration(DefaultInterval) {
		t.Errorf("--fast-signal off: fast_signal %q, interval %s", off.Backends[0].FastSignal, off.Interval)
	}
}

func TestFromFlagsPerConnection(t *testing.T) {
	c, err := FromFlags(Flags{Backend: "b", Source: map[string]string{"haproxy-counter": "bytes_in", "per-connection": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Backends[0].Source.Config().(*haproxy.StatsConfig); h == nil || h.Counter != "bytes_in" || !h.PerConnection {
		t.Errorf("haproxy source %+v", h)
	}
	_, err = FromFlags(Flags{Backend: "b", Source: map[string]string{"haproxy-counter": "current_sessions", "per-connection": "true"}})
	if err == nil || !strings.HasPrefix(err.Error(), "--per-connection needs a rate counter") {
		t.Errorf("per-connection with a gauge: %v", err)
	}
}

func TestFromFlagsErrors(t *testing.T) {
	_, err := FromFlags(Flags{Backend: "b", Source: map[string]string{"prometheus-url": "http://x", "query": "up", "haproxy-counter": "bytes_in"}})
	if err == nil || err.Error() != "more than one load source: give one of --prometheus-url, --graphite-url or --haproxy-counter" {
		t.Errorf("two sources: %v", err)
	}
	if _, err := FromFlags(Flags{Source: map[string]string{"prometheus-url": "http://x"}}); err == nil || !strings.Contains(err.Error(), "--backend") {
		t.Errorf("no backend: %v", err)
	}
}

// A source's problems were joined under one prefix, and only the first line
// was phrased for the flags; each line names its flag.
func TestFromFlagsEveryProblemNamesItsFlag(t *testing.T) {
	_, err := FromFlags(Flags{Backend: "b", Source: map[string]string{"prometheus-url": "ftp://x"}, LimitingFactor: new(float64)})
	want := "--prometheus-url: must be an absolute http or https URL\n--query: must be set\n--limiting-factor must be > 1, got 0"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

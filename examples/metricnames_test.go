package examples

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/daemon"
)

// daemonRegistry is the registry the daemon serves /metrics from, with every collector the
// daemon registers (its own, the peers', Go, process, build info) and no series yet.
func daemonRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	cfg, err := config.Load("config/haproxy-stats.yaml")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	daemon.New(cfg, daemon.Options{Registry: reg})
	return reg
}

// registered says whether reg has a metric family called name. A vector with no series yet
// does not show in Gather, so it asks the registry itself: a registry refuses a second
// descriptor of a name it has with other help or labels, and takes one of a name it has not.
func registered(t *testing.T, reg *prometheus.Registry, name string) bool {
	t.Helper()
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe of whether the daemon registers this name"})
	err := reg.Register(probe)
	if err == nil {
		reg.Unregister(probe)
		return false
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		t.Fatalf("probe %s: %v", name, err)
	}
	if !strings.Contains(err.Error(), "same fully-qualified name") {
		t.Fatalf("probe %s: unexpected registry error: %v", name, err)
	}
	return true
}

// exportedName says whether the daemon exports name, a histogram's _bucket, _sum and _count
// series included.
func exportedName(t *testing.T, reg *prometheus.Registry, name string) bool {
	if registered(t, reg, name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered(t, reg, base) {
			return true
		}
	}
	return false
}

// TestRegisteredProbe pins the probe the test below relies on.
func TestRegisteredProbe(t *testing.T) {
	reg := daemonRegistry(t)
	for name, want := range map[string]bool{
		"haproxy_weighter_server_weight":                true,
		"haproxy_weighter_peer_up":                      true, // registered by the daemon, not metrics.New
		"haproxy_weighter_build_info":                   true,
		"haproxy_weighter_cycle_duration_seconds_count": true,
		"haproxy_weighter_server_weights":               false,
		"haproxy_weighter_cycles":                       false,
	} {
		if got := exportedName(t, reg, name); got != want {
			t.Errorf("exported %s = %v, want %v", name, got, want)
		}
	}
	// A probe leaves the registry as it found it.
	if exportedName(t, reg, "haproxy_weighter_server_weights") {
		t.Error("a probe of an unknown name registered it")
	}
}

// TestExamplesNameExportedMetrics: every haproxy_weighter_* name in the operator-facing files
// (examples/, the packaged config, the README and docs/) is one the daemon registers today, so
// a renamed metric cannot leave a dashboard, an alert, a promtool test or a document querying
// a series that no longer exists.
func TestExamplesNameExportedMetrics(t *testing.T) {
	root := repoRoot(t)
	reg := daemonRegistry(t)
	var files []string
	for _, dir := range []string{"examples", "packaging", "docs"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch filepath.Ext(path) {
			case ".yaml", ".yml", ".json", ".md", ".service", ".sh", ".extra":
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "Dockerfile"))
	checked := map[string]bool{}
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		var bad []string
		for _, name := range metricRe.FindAllString(string(b), -1) {
			seen++
			name = strings.TrimRight(name, "_")
			ok, done := checked[name]
			if !done {
				ok = exportedName(t, reg, name)
				checked[name] = ok
			}
			if !ok && !slices.Contains(bad, name) {
				bad = append(bad, name)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s names metrics the daemon does not export: %s", rel, strings.Join(bad, ", "))
		}
	}
	if seen == 0 {
		t.Fatal("no haproxy_weighter_ name found: the file walk is broken")
	}
}

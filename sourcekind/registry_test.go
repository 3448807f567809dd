package sourcekind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The packages that use sources (config, daemon, cmd) reach each kind only
// through the registry: none of them names a kind's configuration type or
// constructor, so a new kind cannot be half wired by editing one of them.
func TestOnlyTheRegistryNamesKinds(t *testing.T) {
	kindAPI := []string{"sources.PrometheusConfig", "sources.GraphiteConfig", "sources.NewPrometheus",
		"sources.NewGraphite", "haproxy.StatsConfig", "haproxy.NewStatsSource", `"prometheus"`, `"graphite"`}
	for _, dir := range []string{"../config", "../daemon", "../cmd"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range kindAPI {
				if strings.Contains(string(data), name) {
					t.Errorf("%s names %s: reach the kind through sourcekind", f, name)
				}
			}
		}
	}
}

func TestKindsInOrder(t *testing.T) {
	if got := Names(", "); got != "prometheus, graphite, haproxy" {
		t.Errorf("kinds %q", got)
	}
	for _, k := range All() {
		if k.Default() == nil || len(k.Flags) == 0 {
			t.Errorf("%s: no defaults or no flags", k.Name)
		}
	}
}

// The external kinds say the span of their points; HAProxy's own statistics
// do not calibrate, and only their byte counters have a fast signal.
func TestWindowsAndFastBytes(t *testing.T) {
	prom, _ := Lookup("prometheus")
	cfg := prom.Default()
	prom.Flags[1].Set(cfg, "rate(datapoints_received_total[1m])")
	if w := prom.Window(cfg); w.Span != time.Minute || w.FromStep || !prom.Calibrates() {
		t.Errorf("prometheus window %+v", w)
	}
	prom.Flags[1].Set(cfg, "node_load1")
	if w := prom.Window(cfg); w.Span != 0 {
		t.Errorf("a gauge has no window: %+v", w)
	}
	graphite, _ := Lookup("graphite")
	if w := graphite.Window(graphite.Default()); !w.FromStep {
		t.Errorf("graphite window %+v", w)
	}
	hap, _ := Lookup("haproxy")
	c := hap.Default()
	if hap.Calibrates() {
		t.Error("haproxy calibrates")
	}
	for counter, want := range map[string]weighter.Bytes{"bytes_in": weighter.BytesIn, "bytes_out": weighter.BytesOut, "current_sessions": ""} {
		hap.Flags[0].Set(c, counter)
		if got, ok := hap.FastBytes(c); got != want || ok != (want != "") {
			t.Errorf("%s: %q %v", counter, got, ok)
		}
	}
	if got, ok := prom.FastBytes(cfg); got != weighter.BytesBoth || !ok {
		t.Errorf("prometheus fast bytes %q", got)
	}
}

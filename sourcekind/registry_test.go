package sourcekind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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

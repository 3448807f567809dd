package cmd

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/daemon"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/sourcekind"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
)

// TestEverySourceKindWorksEverywhere writes each kind in a file and by flags
// and follows it through decoding (defaults), validation, validate's build and
// the daemon's: a kind registered without one of its parts fails here.
func TestEverySourceKindWorksEverywhere(t *testing.T) {
	// fast_signal: off, so that the daemon's source is the kind's own and not
	// the fast signal it calibrates.
	const head = "listen: \"\"\nhaproxy: {socket: /run/test.sock}\nbackends:\n  - name: be\n    fast_signal: off\n    source:\n"
	kinds := map[string]struct {
		yaml  string
		flags map[string]string
		check func(t *testing.T, s config.Source)
		// built is the type of the source the daemon builds.
		built any
	}{
		"prometheus": {
			yaml:  "      prometheus: {url: http://127.0.0.1:9090, query: up}\n",
			flags: map[string]string{"prometheus-url": "http://127.0.0.1:9090", "query": "up"},
			check: func(t *testing.T, s config.Source) {
				assert.Equal(t, "server", s.Config().(*sources.PrometheusConfig).ServerLabel, "a default")
			},
			built: &sources.Prometheus{},
		},
		"graphite": {
			yaml:  "      graphite: {url: http://127.0.0.1:8080, target: 'aliasByNode(a.*.b,1)'}\n",
			flags: map[string]string{"graphite-url": "http://127.0.0.1:8080", "target": "aliasByNode(a.*.b,1)"},
			check: func(t *testing.T, s config.Source) {
				assert.Equal(t, "-5min", s.Config().(*sources.GraphiteConfig).From, "a default")
			},
			built: &sources.Graphite{},
		},
		"haproxy": {
			yaml:  "      haproxy: {counter: bytes_in, per_connection: true}\n",
			flags: map[string]string{"haproxy-counter": "bytes_in", "per-connection": "true"},
			check: func(t *testing.T, s config.Source) {
				assert.Equal(t, &haproxy.StatsConfig{Counter: "bytes_in", PerConnection: true}, s.Config())
			},
			built: &haproxy.StatsSource{},
		},
	}
	for _, k := range sourcekind.All() {
		assert.Contains(t, kinds, k.Name(), "a registered kind this test does not follow")
	}
	for kind, tc := range kinds {
		t.Run(kind, func(t *testing.T) {
			cfg, err := config.Parse("c.yml", []byte(head+tc.yaml), nil)
			require.NoError(t, err)
			src := cfg.Backends[0].Source
			assert.Equal(t, kind, src.Kind())
			tc.check(t, src)

			byFlags, err := config.FromFlags(config.Flags{Backend: "be", Source: tc.flags, FastSignal: config.FastOff})
			require.NoError(t, err)
			assert.Equal(t, src, byFlags.Backends[0].Source, "flags and file give the same source")

			path := filepath.Join(t.TempDir(), "c.yml")
			require.NoError(t, os.WriteFile(path, []byte(head+tc.yaml), 0o600))
			_, _, err = execute(t, "validate", path)
			require.NoError(t, err)

			units, err := daemon.Build(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			require.NoError(t, err)
			defer func() {
				for _, u := range units {
					u.Close()
				}
			}()
			assert.IsType(t, tc.built, units[0].Backend.Source)
		})
	}

	for yml, want := range map[string]string{
		"      prometheus: {url: http://x, quer: up}\n": `c.yml:7: unknown key "quer"`,
		"      tock: {}\n": `c.yml:7: unknown key "tock"`,
		"      {}\n":       "c.yml:6: backends[0] (be): source: missing (one of prometheus, graphite, haproxy)",
		"      graphite: {url: http://x, target: t}\n      haproxy: {counter: bytes_in}\n": "c.yml:6: backends[0] (be): source: more than one of prometheus, graphite, haproxy",
	} {
		_, err := config.Parse("c.yml", []byte(head+yml), nil)
		if assert.Error(t, err, yml) {
			assert.Equal(t, want, err.Error(), yml)
		}
	}
	_, err := config.FromFlags(config.Flags{Backend: "be"})
	assert.EqualError(t, err, "no load source: give --prometheus-url, --graphite-url or --haproxy-counter")
	_, err = config.FromFlags(config.Flags{Backend: "be", Source: map[string]string{"haproxy-counter": "bytes_in", "target": "x"}})
	assert.ErrorContains(t, err, "more than one load source")
}

// The source flags are run's and once's flags, and nothing else names a
// source on the command line.
func TestSourceFlagsAreRunsAndOnces(t *testing.T) {
	for _, name := range []string{"run", "once"} {
		c, _, err := NewRoot(io.Discard, io.Discard).Find([]string{name})
		require.NoError(t, err)
		for _, f := range config.SourceFlags() {
			if fl := c.Flags().Lookup(f.Name); assert.NotNil(t, fl, "%s --%s", name, f.Name) {
				assert.Equal(t, f.Usage, fl.Usage)
			}
		}
	}
	kinds := map[string]bool{}
	for _, f := range config.SourceFlags() {
		kinds[f.Kind] = true
		assert.False(t, strings.Contains(f.Kind, "."), "kind %s: a key with a dot", f.Kind)
	}
	assert.Len(t, kinds, len(sourcekind.All()), "run without --config needs a flag to choose each kind")
}

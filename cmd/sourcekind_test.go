package cmd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/daemon"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
	"github.com/haproxy-weighter/haproxy-weighter/sourcekind"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// tickConfig is the configuration of a source kind that exists only here.
type tickConfig struct {
	Level int               `yaml:"level"`
	Every duration.Duration `yaml:"every"`
}

type tickSource struct{ backend string }

func (tickSource) Fetch(context.Context) (weighter.Loads, error) { return nil, nil }

// registerTick adds a fourth source kind the way a new kind's file would,
// and records the backends it was built for.
func registerTick(t *testing.T) *[]string {
	var built []string
	sourcekind.Register(sourcekind.Spec[tickConfig]{
		Name:    "tick",
		Rank:    1000,
		Default: func() tickConfig { return tickConfig{Level: 7, Every: duration.Duration(time.Second)} },
		Validate: func(c tickConfig) error {
			if c.Level < 0 {
				return field.Errorf("level", "tick: level: must not be negative")
			}
			return nil
		},
		New: func(c tickConfig, env sourcekind.Env) (weighter.Source, error) {
			if c.Level == 99 {
				return nil, errors.New("tick: level 99 is refused by the constructor")
			}
			built = append(built, env.Backend)
			return tickSource{env.Backend}, nil
		},
		Flags: []sourcekind.Flag[tickConfig]{{Name: "tick-level", Key: "level", Usage: "the tick level",
			Set: func(c *tickConfig, v string) { c.Level, _ = strconv.Atoi(v) }}},
	})
	t.Cleanup(func() { sourcekind.Unregister("tick") })
	return &built
}

// TestSourceKindRegistryIsTheOnlyList adds a kind through sourcekind alone
// and finds it everywhere source kinds matter: the configuration's keys,
// defaults and validation, the list in messages, flags, validate and the
// daemon's Build. Were a kind listed anywhere else, this kind would be
// missing there.
func TestSourceKindRegistryIsTheOnlyList(t *testing.T) {
	built := registerTick(t)
	const head = "listen: \"\"\nhaproxy: {socket: /run/test.sock}\nbackends:\n  - name: be\n    source:\n"

	cfg, err := config.Parse("c.yml", []byte(head+"      tick: {every: 0}\n"), nil)
	require.NoError(t, err)
	src := cfg.Backends[0].Source
	assert.Equal(t, "tick", src.Kind())
	assert.Equal(t, &tickConfig{Level: 7}, src.Config(), "defaults, and a bare 0 for a duration")

	for yml, want := range map[string]string{
		"      tick: {level: -1}\n": "c.yml:6: backends[0] (be): source: tick: level: must not be negative",
		"      tick: {lvl: 1}\n":    `c.yml:6: unknown key "lvl"`,
		"      tock: {}\n":          `c.yml:6: unknown key "tock"`,
		"      {}\n":                "c.yml:5: backends[0] (be): source: missing (one of prometheus, graphite, haproxy, tick)",
		"      tick: {}\n      haproxy: {counter: bytes_in}\n": "c.yml:5: backends[0] (be): source: more than one of prometheus, graphite, haproxy, tick",
	} {
		_, err := config.Parse("c.yml", []byte(head+yml), nil)
		if assert.Error(t, err, yml) {
			assert.Equal(t, want, err.Error(), yml)
		}
	}

	_, err = config.FromFlags(config.Flags{Backend: "be", Source: map[string]string{"tick-level": "-1"}})
	assert.EqualError(t, err, "--tick-level: must not be negative")
	_, err = config.FromFlags(config.Flags{Backend: "be"})
	assert.EqualError(t, err, "no load source: give --prometheus-url, --graphite-url, --haproxy-counter or --tick-level")

	path := filepath.Join(t.TempDir(), "c.yml")
	require.NoError(t, os.WriteFile(path, []byte(head+"      tick: {level: 99}\n"), 0o600))
	_, _, err = execute(t, "validate", path)
	assert.EqualError(t, err, "invalid configuration:\n"+path+": backend be: tick: level 99 is refused by the constructor")

	units, err := daemon.Build(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	assert.Equal(t, tickSource{"be"}, units[0].Backend.Source)
	assert.Equal(t, []string{"be"}, *built)
}

// The built-in kinds' flags are run's and once's flags, and nothing else
// names a source on the command line.
func TestSourceFlagsComeFromTheRegistry(t *testing.T) {
	for _, name := range []string{"run", "once"} {
		c, _, err := rootCmd.Find([]string{name})
		require.NoError(t, err)
		for _, k := range sourcekind.All() {
			for _, f := range k.Flags {
				if fl := c.Flags().Lookup(f.Name); assert.NotNil(t, fl, "%s --%s", name, f.Name) {
					assert.Equal(t, f.Usage, fl.Usage)
				}
			}
		}
	}
	for _, k := range sourcekind.All() {
		assert.NotEmpty(t, k.Flags, "kind %s: run without --config needs a flag to choose it", k.Name)
		assert.False(t, strings.Contains(k.Name, "."), "kind %s: a key with a dot", k.Name)
	}
}

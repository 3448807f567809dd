package main

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/config"
)

// Each arm's daemon config is the README's Graphite example with this bench's socket,
// Graphite and caches, scaled by 1/interval, and the arm's shed and pin settings; it
// must be one the daemon accepts.
func TestDaemonConfig(t *testing.T) {
	example, err := os.ReadFile("../config/graphite-carbon.yaml")
	require.NoError(t, err)
	o, err := parseFlags(nil)
	require.NoError(t, err)
	agents := map[string]string{"vm-a": "cache-a", "vm-b": "cache-b"}
	for _, a := range allArms[1:] {
		b, err := daemonConfig(example, o, a, "/x/haproxy.sock", "http://127.0.0.1:1", "127.0.0.1:2", agents)
		require.NoError(t, err, a.Name)
		cfg, err := config.Parse("weighter.yaml", b, nil)
		require.NoError(t, err, "%s:\n%s", a.Name, b)
		be := cfg.Backends[0]
		assert.Equal(t, "be_carbon", be.Name)
		assert.Equal(t, "/x/haproxy.sock", cfg.HAProxy.Socket)
		var raw struct {
			Backends []struct {
				Source struct {
					Graphite struct {
						Target    string            `yaml:"target"`
						ServerMap map[string]string `yaml:"server_map"`
					} `yaml:"graphite"`
				} `yaml:"source"`
			} `yaml:"backends"`
		}
		require.NoError(t, yaml.Unmarshal(b, &raw))
		assert.Equal(t, "scale(carbon.agents.*.metricsReceived, 0.1)", raw.Backends[0].Source.Graphite.Target, a.Name)
		assert.Equal(t, agents, raw.Backends[0].Source.Graphite.ServerMap)
		_, shed := be.ShedPolicy()
		assert.Equal(t, a.Shed, shed, a.Name)
		mode, _, _ := be.PinSettings()
		assert.Equal(t, a.Pin, mode != config.PinOff, a.Name)
	}
}

// perMinute adds each cache's counts of a minute (stamped up to one step early) into
// datapoints/s; agents not in the map are left out.
func TestPerMinute(t *testing.T) {
	t0 := time.Unix(1000, 0)
	counts := map[string][]point{
		"vm-a":  {{time.Unix(1000, 0), 600}, {time.Unix(1050, 0), 600}, {time.Unix(1060, 0), 1200}},
		"vm-b":  {{time.Unix(1110, 0), 60}},
		"other": {{time.Unix(1010, 0), 999}},
	}
	got := perMinute(counts, map[string]string{"vm-a": "cache-a", "vm-b": "cache-b"}, []string{"cache-a", "cache-b"},
		t0, t0.Add(2*time.Minute), 10*time.Second)
	assert.Equal(t, [][]float64{{20, 0}, {20, 1}}, got) // (990, 1050] and (1050, 1110]
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-arms", "leastconn,pin+shed", "-rates", "2000,2000,20"})
	require.NoError(t, err)
	assert.Equal(t, []string{"leastconn", "pin+shed"}, []string{o.arms[0].Name, o.arms[1].Name})
	assert.Equal(t, []float64{2000, 2000, 20}, o.rates)
	for _, bad := range [][]string{{"-arms", "nope"}, {"-rates", "5"}, {"-interval", "7s"}, {"-duration", "10s"}} {
		_, err := parseFlags(bad)
		assert.Error(t, err, bad)
	}
}

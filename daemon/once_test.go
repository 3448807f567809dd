package daemon

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// TestSampleOnceLeavesTheConfig: a single cycle waits one rate window for a
// rate, on a copy: the configuration the caller loaded stays as it was.
func TestSampleOnceLeavesTheConfig(t *testing.T) {
	yml := "listen: \"\"\ninterval: 5s\nhaproxy: {socket: /nonexistent.sock}\nbackends:\n" +
		"  - name: a\n    source: {haproxy: {counter: bytes_in}}\n" +
		"  - name: b\n    source: {haproxy: {counter: bytes_in, rate_window: 20s}}\n" +
		"  - name: c\n    source: {haproxy: {counter: bytes_in, sample_interval: 1s}}\n" +
		"  - name: d\n    source: {prometheus: {url: \"http://127.0.0.1:9090\", query: up, server_label: server}}\n"
	cfg, err := config.Parse("test.yml", []byte(yml), func(string) (string, bool) { return "", false })
	require.NoError(t, err)

	sampled, wait := sampleOnce(cfg)
	assert.Equal(t, 20*time.Second, wait)
	got := []time.Duration{}
	for _, b := range sampled.Backends[:3] {
		got = append(got, time.Duration(b.Source.Config().(*haproxy.StatsConfig).SampleInterval))
	}
	assert.Equal(t, []time.Duration{haproxy.DefaultRateWindow, 20 * time.Second, time.Second}, got)
	for i, b := range cfg.Backends[:2] {
		assert.Zero(t, b.Source.Config().(*haproxy.StatsConfig).SampleInterval, "backend %d of the loaded config changed", i)
	}
	assert.Equal(t, duration.Duration(time.Second), cfg.Backends[2].Source.Config().(*haproxy.StatsConfig).SampleInterval)
}

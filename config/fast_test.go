package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

const promSource = "    source: {prometheus: {url: \"http://127.0.0.1:9090\", query: 'rate(x[1m])'}}\n"

func TestIntervalDefaultFollowsTheFastSignal(t *testing.T) {
	for name, tc := range map[string]struct {
		yml  string
		want time.Duration
	}{
		"haproxy backend, external source": {"backends:\n  - name: b\n" + promSource, DefaultFastInterval},
		"fast signal off":                  {"backends:\n  - name: b\n    fast_signal: off\n" + promSource, DefaultInterval},
		"haproxy bytes: fast alone":        {"backends:\n  - name: b\n    source: {haproxy: {counter: bytes_in}}\n", DefaultFastInterval},
		"haproxy session count":            {"backends:\n  - name: b\n    source: {haproxy: {counter: current_sessions}}\n", DefaultInterval},
		"ipvs, external source: counts":    {"backends:\n  - name: u\n    ipvs: {service: udp://10.0.0.1:2003}\n" + promSource, DefaultFastInterval},
		"ipvs, fast signal off":            {"backends:\n  - name: u\n    fast_signal: off\n    ipvs: {service: udp://10.0.0.1:2003}\n" + promSource, DefaultInterval},
		"set in the file":                  {"interval: 7s\nbackends:\n  - name: b\n" + promSource, 7 * time.Second},
		"drain thresholds":                 {"backends:\n  - name: b\n    drain_above: 100\n    resume_below: 50\n" + promSource, DefaultInterval},
		"connection_life":                  {"backends:\n  - name: b\n    connection_life: 30s\n" + promSource, DefaultInterval},
	} {
		c, err := Parse("c.yml", []byte(tc.yml), noEnv)
		require.NoError(t, err, name)
		assert.Equal(t, tc.want, time.Duration(c.Interval), name)
	}
}

func TestFastDefaultsAndWindow(t *testing.T) {
	c, err := Parse("c.yml", []byte("backends:\n  - name: b\n"+promSource), noEnv)
	require.NoError(t, err)
	b := c.Backends[0]
	assert.True(t, b.UsesFastSignal())
	assert.True(t, b.Calibrates())
	assert.Equal(t, weighter.BytesBoth, b.FastBytes())
	p, w := b.CalibrationPolicy()
	assert.Equal(t, weighter.DefaultCalibration(time.Minute), p, "the research's parameters, the query's window")
	assert.Contains(t, w.How, "[1m]")
	assert.Equal(t, DefaultRefresh, time.Duration(b.Calibration.Refresh))

	c, err = Parse("c.yml", []byte("backends:\n  - name: b\n    calibration: {window: 30s, half_life: 1m}\n"+promSource), noEnv)
	require.NoError(t, err)
	p, w = c.Backends[0].CalibrationPolicy()
	assert.Equal(t, 30*time.Second, p.Window)
	assert.Equal(t, time.Minute, p.HalfLife)
	assert.Equal(t, "calibration.window", w.How)

	gauge := strings.Replace(promSource, "'rate(x[1m])'", "node_load1", 1)
	c, err = Parse("c.yml", []byte("backends:\n  - name: b\n"+gauge), noEnv)
	require.NoError(t, err)
	p, w = c.Backends[0].CalibrationPolicy()
	assert.Equal(t, DefaultCalibrationWindow, p.Window)
	assert.Contains(t, w.How, "assumed")

	c, err = Parse("c.yml", []byte("backends:\n  - name: b\n    source: {haproxy: {counter: bytes_out}}\n"), noEnv)
	require.NoError(t, err)
	assert.True(t, c.Backends[0].UsesFastSignal())
	assert.False(t, c.Backends[0].Calibrates())
	assert.Equal(t, weighter.BytesOut, c.Backends[0].FastBytes())
}

func TestFastKeysAreChecked(t *testing.T) {
	for yml, want := range map[string]string{
		"    fast_signal: maybe\n":           `c.yml:3: backends[0] (b): fast_signal: want on, off, or one reader pinned: kernel, sessions or stat; got "maybe"`,
		"    calibration: {max_factor: 1}\n": `c.yml:3: backends[0] (b): calibration: max_factor must be > 1, got 1`,
		"    calibration: {hold: 0}\n":       `c.yml:3: backends[0] (b): calibration: hold must be > 0, got 0s`,
		"    calibration: {window: -1s}\n":   `c.yml:3: backends[0] (b): calibration: window must be >= 0 (0 = from the source), got -1s`,
		"    calibration: {refresh: 0}\n":    `c.yml:3: backends[0] (b): calibration: refresh must be > 0, got 0s`,
		"    calibration: {half_lif: 1m}\n":  `half_lif`,
	} {
		_, err := Parse("c.yml", []byte("backends:\n  - name: b\n"+yml+promSource), noEnv)
		require.Error(t, err, yml)
		assert.Contains(t, err.Error(), want, yml)
	}
}

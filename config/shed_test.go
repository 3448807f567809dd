package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func TestShedOffUnlessConfigured(t *testing.T) {
	c, err := Parse("c.yml", []byte("backends:\n  - name: b\n"+promSource), noEnv)
	require.NoError(t, err)
	_, on := c.Backends[0].ShedPolicy()
	assert.False(t, on, "no shed block: no shedding")

	c, err = Parse("c.yml", []byte("backends:\n  - name: b\n    shed:\n"+promSource), noEnv)
	require.NoError(t, err)
	_, on = c.Backends[0].ShedPolicy()
	assert.False(t, on, "an empty (null) shed key: no shedding")
}

func TestShedKeysOverDefaults(t *testing.T) {
	yml := "backends:\n  - name: b\n" + promSource +
		"    shed: {above: 1.5, for: 3, max_per_minute: 2, max_share: 0.02, min_age: 60s, cooldown: 2m}\n" +
		"  - name: c\n" + promSource + "    shed: {}\n" +
		"  - name: d\n" + promSource + "    shed: {min_age: 0, progress: 0.1}\n"
	c, err := Parse("c.yml", []byte(yml), noEnv)
	require.NoError(t, err)
	p, on := c.Backends[0].ShedPolicy()
	require.True(t, on)
	want := weighter.DefaultShed()
	want.Above, want.For, want.MaxPerMinute, want.MaxShare, want.MinAge, want.Cooldown = 1.5, 3, 2, 0.02, duration.Duration(time.Minute), duration.Duration(2*time.Minute)
	assert.Equal(t, want, p)

	p, on = c.Backends[1].ShedPolicy()
	require.True(t, on, "shed: {} turns it on with the recommended factors")
	assert.Equal(t, weighter.DefaultShed(), p)

	p, _ = c.Backends[2].ShedPolicy()
	want = weighter.DefaultShed()
	want.MinAge, want.Progress = 0, 0.1
	assert.Equal(t, want, p, "a bare 0 is a zero duration")
}

func TestShedRefusals(t *testing.T) {
	for name, tc := range map[string]struct{ yml, want string }{
		"bad values, each at its line": {
			"backends:\n  - name: b\n" + promSource + "    shed:\n      above: 1\n      max_share: 2\n      min_age: -1s\n",
			"c.yml:5: backends[0] (b): shed.above must be > 1, got 1\n" +
				"c.yml:6: backends[0] (b): shed.max_share must be in (0, 1], got 2\n" +
				"c.yml:7: backends[0] (b): shed.min_age must be >= 0, got -1s"},
		"ipvs": {
			"backends:\n  - name: u\n    ipvs: {service: udp://10.0.0.1:2003}\n" + promSource + "    shed: {above: 2}\n",
			"c.yml:5: backends[0] (u): shed: not possible on an IPVS service: IPVS neither measures nor closes single connections (remove shed, or balance with HAProxy)"},
		"fast signal off": {
			"backends:\n  - name: b\n    fast_signal: off\n" + promSource + "    shed: {}\n",
			"c.yml:5: backends[0] (b): shed: needs HAProxy's fast signal, which gives each session's rate, and it is off here (fast_signal: off)"},
		"session count source": {
			"backends:\n  - name: b\n    source: {haproxy: {counter: current_sessions}}\n    shed: {}\n",
			"c.yml:4: backends[0] (b): shed: needs HAProxy's fast signal, which gives each session's rate, and it is off here (the source is not a byte counter)"},
		"unknown key": {
			"backends:\n  - name: b\n" + promSource + "    shed: {abov: 2}\n",
			"c.yml:4: unknown key \"abov\""},
	} {
		_, err := Parse("c.yml", []byte(tc.yml), noEnv)
		require.Error(t, err, name)
		assert.Equal(t, tc.want, err.Error(), name)
	}
}

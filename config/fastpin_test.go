package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFastSignalPinsAReader: fast_signal kernel, sessions or stat is the
// fast signal on (the fast interval, shedding allowed), with that reader
// named; on an IPVS service, which has no such readers, it is refused.
func TestFastSignalPinsAReader(t *testing.T) {
	for _, reader := range []string{FastKernel, FastSessions, FastStat} {
		c, err := Parse("c.yml", []byte("backends:\n  - name: b\n    fast_signal: "+reader+"\n"+promSource), noEnv)
		require.NoError(t, err, reader)
		b := c.Backends[0]
		assert.Equal(t, reader, b.FastSignal)
		assert.True(t, b.UsesFastSignal(), reader)
		assert.Equal(t, DefaultFastInterval, time.Duration(c.Interval), reader)

		_, err = Parse("c.yml", []byte("backends:\n  - name: u\n    fast_signal: "+reader+"\n    ipvs: {service: udp://10.0.0.1:2003}\n"+promSource), noEnv)
		require.Error(t, err, reader)
		assert.Contains(t, err.Error(), "c.yml:3: backends[0] (u): fast_signal: "+reader+" is a reader of HAProxy's", reader)
	}
}

package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary play the child processes, as the command's binary does.
func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestMeasureSizeReadsEveryConnection runs the benchmark at a small size through a real
// HAProxy: every reader's first read sees every connection, every read of the windows
// succeeds, the probe gets through, and the report has a row per method. Its figures are not
// checked (this is no timed test); they are what the command prints.
func TestMeasureSizeReadsEveryConnection(t *testing.T) {
	o, err := parseOptions([]string{"-conns", "40", "-duration", "2s", "-interval", "1s", "-rounds", "1", "-settle", "0s"})
	require.NoError(t, err)
	_, err = raiseFileLimit()
	require.NoError(t, err)
	res, err := measureSize(context.Background(), o, 40, 40)
	require.NoError(t, err)

	require.Len(t, res.methods, len(allMethods))
	for _, m := range res.methods {
		require.Len(t, m.windows, 1, m.method)
		w := m.windows[0]
		assert.Equal(t, 2, w.expected, m.method)
		assert.Positive(t, m.probe.n, "%s: probe round trips", m.method)
		assert.LessOrEqual(t, m.probe.nDuring, m.probe.n, m.method)
		assert.NoError(t, w.firstErr, m.method)
		if m.method == "none" {
			assert.Equal(t, -1, m.seen)
			assert.Zero(t, w.made)
			continue
		}
		assert.Equal(t, 40, m.seen, "%s: connections the first read saw", m.method)
		assert.Positive(t, w.made, m.method)
		assert.Positive(t, w.allocs, "%s: allocations counted", m.method)
	}
	assert.Zero(t, res.writeErrors)

	var b strings.Builder
	report(&b, o, environment{at: time.Now()}, []sizeResult{res})
	for _, m := range allMethods {
		assert.Contains(t, b.String(), "| 40 | "+m+" |")
	}
	assert.Contains(t, b.String(), "first read saw kernel 40, sess 40, stat 40")
}

// A size HAProxy cannot hold under the hard descriptor limit is lowered to a hundred that fits
// (the build machine's hard limit of 20,000 gives 9,900, which HAProxy 2.6 held).
func TestFitConns(t *testing.T) {
	assert.Equal(t, 9900, fitConns(10_000, 20_000))
	assert.Equal(t, 5000, fitConns(5000, 20_000))
	assert.Equal(t, 10_000, fitConns(10_000, 1<<20))
}

func TestParseMethodsKeepsTheBaselineFirst(t *testing.T) {
	got, err := parseMethods("stat,none,kernel")
	require.NoError(t, err)
	assert.Equal(t, []string{"none", "kernel", "stat"}, got)
	_, err = parseMethods("kernel,show")
	assert.ErrorContains(t, err, `unknown "show"`)
}

func TestThousands(t *testing.T) {
	assert.Equal(t, "100,000", thousands(100_000))
	assert.Equal(t, "9,900", thousands(9900))
	assert.Equal(t, "40", thousands(40))
}

func TestLinearAt(t *testing.T) {
	assert.InDelta(t, 100.0, linearAt([]float64{1000, 1000}, []float64{1, 1}, 100_000), 1e-9, "one size twice")
	// y = 2 + 0.01x through three points.
	assert.InDelta(t, 1002.0, linearAt([]float64{1000, 5000, 9900}, []float64{12, 52, 101}, 100_000), 1e-6)
}

// processCPU reads another process's CPU clock: this process's own, spent spinning, grows by
// at least what was spun.
func TestProcessCPUCountsEveryThread(t *testing.T) {
	before, err := processCPU(os.Getpid())
	require.NoError(t, err)
	spun := selfCPU()
	for selfCPU()-spun < 50*time.Millisecond {
	}
	after, err := processCPU(os.Getpid())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after-before, 50*time.Millisecond)
}
